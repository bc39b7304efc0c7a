#!/usr/bin/env bash
# The honesty check of bench/machine_limits: this host's bandwidth and FMA peak as the engine measures
# them, beside a STREAM triad built with -march=native and OpenMP, alternating round by round.
#   bench/limits_vs_stream.sh STREAM_SOURCE [ROUNDS]
# STREAM_SOURCE: a STREAM-style C source printing "triad_best=X GB/s" (and "fp32_fma_peak=Y GFLOP/s"),
# e.g. ../shared/bench/peer/stream_triad.c; it is compiled here, not shipped with the project.
# Prints each round, then medians [min, max] and the ratios ours / STREAM.
set -euo pipefail
src=${1:?usage: $0 STREAM_SOURCE [ROUNDS]}
rounds=${2:-5}
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "ROUNDS must be a positive integer" >&2; exit 2; }
here=$(cd "$(dirname "$0")/.." && pwd)
limits=${MACHINE_LIMITS:-$here/build/bench/machine_limits}
[[ -x $limits ]] || { echo "build $limits first (scripts/build.sh)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
gcc -O3 -march=native -fopenmp "$src" -o "$work/stream"
threads=$(nproc)
echo "host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $threads threads"
echo "STREAM: gcc -O3 -march=native -fopenmp $(basename "$src"), OMP_NUM_THREADS=$threads OMP_PROC_BIND=spread"
for ((r = 1; r <= rounds; ++r)); do
  OMP_NUM_THREADS=$threads OMP_PROC_BIND=spread "$work/stream" >"$work/s.$r"
  "$limits" --threads "$threads" >"$work/l.$r"
  echo "round $r: STREAM $(tr '\n' ' ' <"$work/s.$r"); ours $(head -1 "$work/l.$r" | cut -d' ' -f3-)"
done
python3 - "$work" "$rounds" <<'PY'
import re, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
def col(prefix, key, optional=False):
    out = []
    for r in range(1, rounds + 1):
        m = re.search(r'\b' + key + r'=([0-9.]+)', open(f'{work}/{prefix}.{r}').read())
        if not m and optional:
            return None
        if not m:
            sys.exit(f'round {r}: no {key}= in the output of ' + ('STREAM' if prefix == 's' else 'machine_limits'))
        out.append(float(m.group(1)))
    return out
def show(name, xs):
    print(f'{name:28s} median {statistics.median(xs):8.1f}  [{min(xs):.1f}, {max(xs):.1f}]')
    return statistics.median(xs)
s_triad = show('STREAM triad GB/s', col('s', 'triad_best'))
s_fma_col = col('s', 'fp32_fma_peak', optional=True)  # not every STREAM source prints one
s_fma = show('STREAM fp32 FMA GFLOP/s', s_fma_col) if s_fma_col else None
triad = show('ours triad GB/s (streaming)', col('l', 'triad_gbs'))
show('ours triad GB/s (plain)', col('l', 'triad_plain_gbs'))
read = show('ours read GB/s', col('l', 'read_gbs'))
show('ours reading GB/s (the limit)', col('l', 'reading_gbs'))
fma = show('ours fp32 FMA GFLOP/s', col('l', 'fma_gflops'))
for k, n in [('bf16dot_gflops', 'ours VDPBF16PS GFLOP/s'), ('int8dot_gops', 'ours int8 dot GOP/s'),
             ('amx_bf16_gflops', 'ours AMX bf16 GFLOP/s'), ('amx_int8_gops', 'ours AMX int8 GOP/s')]:
    show(n, col('l', k))
print(f'ratios of medians: our triad / STREAM triad = {triad / s_triad:.2f}; our read-only GB/s / STREAM triad '
      f'GB/s = {read / s_triad:.2f}' + (f'; our FMA / STREAM FMA = {fma / s_fma:.2f}' if s_fma else ''))
PY
