#!/usr/bin/env bash
# The fuzzing campaign (docs/fuzzing.md): configures ./build-fuzz with clang and -DDS41_FUZZ=ON
# (libFuzzer, ASan, UBSan on every target), builds the harnesses of fuzz/, runs each for --seconds
# seeded from its committed corpus (fuzz/corpus/<name>), and prints executions and findings per
# harness and in total. New inputs the fuzzer keeps go to build-fuzz/corpus/<name> (kept from run
# to run), findings (crash-*, leak-*, timeout-*, oom-*) with their logs to build-fuzz/findings/<name>
# (replaced by the next run).
#
#   scripts/fuzz.sh [--seconds N] [--jobs J] [--only a,b] [--no-build]
#     --seconds N   time per harness (default 60)
#     --jobs J      harnesses run at once (default 1); each is one process on one core
#     --only a,b    these harnesses only (names as in fuzz/: http_request, unit, ...)
#     --no-build    use the binaries already in build-fuzz
# Exit status: 0 when nothing was found, 1 when a harness found something, 2 on a usage error.
# On a shared machine run it under `nice -n 19`.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
seconds=60
jobs=1
only=""
build=1
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --no-build) build=0; shift ;;
    *) echo "usage: $0 [--seconds N] [--jobs J] [--only a,b] [--no-build]" >&2; exit 2 ;;
  esac
done

bdir="$root/build-fuzz"
if [ "$build" = 1 ]; then
  if [ ! -f "$bdir/build.ninja" ]; then
    mkdir -p "$bdir"
    launcher=()
    command -v ccache > /dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
    cmake -S "$root" -B "$bdir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
      -DDS41_FUZZ=ON "${launcher[@]}" > "$bdir/configure.log" 2>&1 || { cat "$bdir/configure.log"; exit 1; }
  fi
  cmake --build "$bdir" -j "$(nproc)" --target ds41_fuzzers
fi

names=()
for src in "$root"/fuzz/*_fuzzer.cc; do
  n=$(basename "$src" _fuzzer.cc)
  if [ -z "$only" ] || [[ ",$only," == *",$n,"* ]]; then names+=("$n"); fi
done
[ ${#names[@]} -gt 0 ] || { echo "no harness matches --only $only" >&2; exit 2; }

# One harness: its own work corpus (the committed corpus is read, never written), findings kept.
run_one() {
  local n=$1
  local work="$bdir/corpus/$n" out="$bdir/findings/$n"
  rm -rf "$out"  # the last run's findings: this run reports its own
  mkdir -p "$work" "$out"
  local rc=0
  "$bdir/fuzz/${n}_fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$out/" "$work" "$root/fuzz/corpus/$n" > "$out/log.txt" 2>&1 || rc=$?
  echo "$rc" > "$out/rc"
}
export -f run_one
export bdir root seconds

start=$(date +%s)
printf '%s\n' "${names[@]}" | xargs -P "$jobs" -I{} bash -c 'run_one {}'
wall=$(( $(date +%s) - start ))

total_execs=0
total_findings=0
printf '%-16s %14s %10s %8s %9s\n' harness executions "exec/s" corpus findings
for n in "${names[@]}"; do
  out="$bdir/findings/$n"
  execs=$(grep -a 'stat::number_of_executed_units:' "$out/log.txt" | tail -1 | awk '{print $2}')
  rate=$(grep -a 'stat::average_exec_per_sec:' "$out/log.txt" | tail -1 | awk '{print $2}')
  corpus=$(find "$bdir/corpus/$n" -type f | wc -l)
  findings=$(find "$out" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) | wc -l)
  rc=$(cat "$out/rc")
  # A sanitizer report or an abort without an artifact (the harness itself failing) counts too.
  if [ "$rc" != 0 ] && [ "$findings" = 0 ]; then findings=1; fi
  total_execs=$(( total_execs + ${execs:-0} ))
  total_findings=$(( total_findings + findings ))
  printf '%-16s %14s %10s %8s %9s\n' "$n" "${execs:-?}" "${rate:-?}" "$corpus" "$findings"
done
printf '%-16s %14s %10s %8s %9s\n' total "$total_execs" "" "" "$total_findings"
echo "wall time ${wall} s, ${#names[@]} harnesses x ${seconds} s, ${jobs} at once; findings and logs in $bdir/findings/"
[ "$total_findings" = 0 ]
