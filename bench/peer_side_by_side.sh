#!/usr/bin/env bash
# The engine beside llama.cpp on this host (issue: engine speed, item 6), alternating round by round,
# each on a 4-bit MoE of comparable shape: our real-width slice (bench/slice_config.sh) and a random
# Q4_0 Mixtral-style MoE (bench/peer_moe_gguf.py), compared in weight bytes read per second while
# decoding and matmul FLOP/s while prefilling 512 tokens (tokens/s would compare the shapes).
#   bench/peer_side_by_side.sh LLAMA_DIR SLICE [ROUNDS]
# LLAMA_DIR: a llama.cpp source tree built by hand (build/bin/llama-bench; the project downloads
# nothing), with its gguf-py; its commit is printed from git, or from LLAMA_COMMIT for an export.
# PEER_GGUF: a model written before by bench/peer_moe_gguf.py (else one is written, about 4 GB).
# SLICE: the engine's checkpoint. ENGINE_BENCH and FP4_NUMERICS (canonical|grid) override ours.
# Prints each round, then medians [min, max] of each figure and of the ratios ours / llama.cpp
# (goals: decode >= 1.5x, prefill >= 2.5x).
set -euo pipefail
llama=${1:?usage: $0 LLAMA_DIR SLICE [ROUNDS]}
slice=${2:?usage: $0 LLAMA_DIR SLICE [ROUNDS]}
rounds=${3:-3}
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "ROUNDS must be a positive integer" >&2; exit 2; }
here=$(cd "$(dirname "$0")/.." && pwd)
ours=${ENGINE_BENCH:-$here/build/bench/engine_bench}
peer=$llama/build/bin/llama-bench
numerics=${FP4_NUMERICS:-canonical}
[[ -x $ours ]] || { echo "build $ours first (scripts/build.sh)" >&2; exit 1; }
[[ -x $peer ]] || { echo "no $peer: build llama.cpp's llama-bench there first" >&2; exit 1; }
[[ -f $slice/config.json ]] || { echo "no checkpoint at $slice (bench/slice_config.sh)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
threads=$(nproc)
# gguf-py imports sentencepiece, which writing a GGUF does not use: a stub where Debian has none.
mkdir -p "$work/py"
python3 -c 'import sentencepiece' 2>/dev/null || echo 'class SentencePieceProcessor: pass' >"$work/py/sentencepiece.py"
model=${PEER_GGUF:-$work/peer_moe.gguf}
[[ -f $model ]] || PYTHONPATH="$llama/gguf-py:$work/py" /usr/bin/python3 "$here/bench/peer_moe_gguf.py" write "$model" >/dev/null
PYTHONPATH="$llama/gguf-py:$work/py" /usr/bin/python3 "$here/bench/peer_moe_gguf.py" account "$model" >"$work/account"
commit=${LLAMA_COMMIT:-$(git -C "$llama" rev-parse --short HEAD 2>/dev/null || echo "unknown: set LLAMA_COMMIT")}
echo "host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $threads threads"
echo "llama.cpp: $peer (commit $commit), model $(basename "$model"): $(tr '\n' ' ' <"$work/account")"
echo "ours: $ours --model $slice, FP4 numerics $numerics"
for ((r = 1; r <= rounds; ++r)); do
  "$peer" -m "$model" -p 512 -n 64 -t "$threads" -r 1 -o jsonl >"$work/peer.$r"
  "$ours" --model "$slice" --threads "$threads" --only decode,prefill --prefill 512 --decode-steps 16 \
    --fp4-numerics "$numerics" >"$work/ours.$r"
  peer_ts=$(/usr/bin/python3 -c 'import json, sys
for line in open(sys.argv[1]):
    t = json.loads(line)
    print("decode" if t["n_gen"] else "prefill", "%.2f tokens/s" % t["avg_ts"], end=" ")' "$work/peer.$r")
  echo "round $r: llama.cpp $peer_ts; ours$(grep -E '^decode batch 1' "$work/ours.$r" | cut -d: -f2 | cut -d, -f1)," \
    "$(grep -oE '^prefill 512 tokens: [0-9.]+ s' "$work/ours.$r")"
done
/usr/bin/python3 - "$work" "$rounds" <<'PY'
import json, re, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
acct = dict(l.split() for l in open(f"{work}/account"))
bytes_tok, flop_tok = float(acct["bytes_per_token"]), float(acct["flop_per_token"])
rows = {k: [] for k in ("peer_dec", "peer_pre", "ours_dec", "ours_pre")}
for r in range(1, rounds + 1):
    for line in open(f"{work}/peer.{r}"):
        t = json.loads(line)
        if t.get("n_gen", 0) > 0 and t.get("n_prompt", 0) == 0:
            rows["peer_dec"].append(t["avg_ts"] * bytes_tok / 1e9)
        elif t.get("n_prompt", 0) > 0 and t.get("n_gen", 0) == 0:
            rows["peer_pre"].append(t["avg_ts"] * flop_tok / 1e9)
    ours = open(f"{work}/ours.{r}").read()
    rows["ours_dec"].append(float(re.search(r"decode batch 1 .*?-> ([0-9.]+) GB/s", ours).group(1)))
    rows["ours_pre"].append(float(re.search(r"prefill 512 tokens: .*?-> ([0-9.]+) GFLOP/s", ours).group(1)))
def show(name, v, unit):
    print(f"{name}: {statistics.median(v):.2f} [{min(v):.2f}, {max(v):.2f}] {unit}")
show("llama.cpp decode", rows["peer_dec"], "GB/s of weights")
show("ours decode", rows["ours_dec"], "GB/s of weights")
show("decode ours / llama.cpp", [a / b for a, b in zip(rows["ours_dec"], rows["peer_dec"])], "x (goal 1.5)")
show("llama.cpp prefill", rows["peer_pre"], "GFLOP/s")
show("ours prefill", rows["ours_pre"], "GFLOP/s")
show("prefill ours / llama.cpp", [a / b for a, b in zip(rows["ours_pre"], rows["peer_pre"])], "x (goal 2.5)")
PY
