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
  echo "round $r: STREAM $(grep -o 'triad_best=[0-9.]*' "$work/s.$r") $(grep -o 'fp32_fma_peak=[0-9.]*' "$work/s.$r" || true);" \
    "ours $(head -1 "$work/l.$r" | cut -d' ' -f3-)"
done
python3 - "$work" "$rounds" <<'PY'
import re, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
def col(prefix, key):
    out = []
    for r in range(1, rounds + 1):
        m = re.search(key + r'=([0-9.]+)', open(f'{work}/{prefix}.{r}').read())
        out.append(float(m.group(1)) if m else float('nan'))
    return out
def show(name, xs):
    print(f'{name:28s} median {statistics.median(xs):8.1f}  [{min(xs):.1f}, {max(xs):.1f}]')
    return statistics.median(xs)
s_triad = show('STREAM triad GB/s', col('s', 'triad_best'))
s_fma = show('STREAM fp32 FMA GFLOP/s', col('s', 'fp32_fma_peak'))
triad = show('ours triad GB/s', col('l', 'triad_gbs'))
read = show('ours read GB/s', col('l', 'read_gbs'))
fma = show('ours fp32 FMA GFLOP/s', col('l', 'fma_gflops'))
for k, n in [('bf16dot_gflops', 'ours VDPBF16PS GFLOP/s'), ('int8dot_gops', 'ours int8 dot GOP/s'),
             ('amx_bf16_gflops', 'ours AMX bf16 GFLOP/s'), ('amx_int8_gops', 'ours AMX int8 GOP/s')]:
    show(n, col('l', k))
print(f'ratios (medians): our triad / STREAM triad = {triad / s_triad:.2f}; our read / STREAM triad = '
      f'{read / s_triad:.2f}; our FMA / STREAM FMA = {fma / s_fma:.2f}')
PY
