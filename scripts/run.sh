#!/usr/bin/env bash
# The main job: builds the project, writes the small checkpoint (once) and generates from it with
# the single-process engine. (The local cluster replaces this once the router exists.)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/build.sh"
model="$root/build/models/tiny"
if [ ! -f "$model/config.json" ]; then
  "$root/build/tools/ds41-ckpt" --preset tiny --seed 1 --out "$model"
fi
"$root/build/tools/ds41" info --model "$model" | head -4
prompt="5,17,99,250,3,64,128,7,300,42"
echo "prompt token ids: $prompt"
echo -n "exact path, greedy: "
"$root/build/tools/ds41" generate --model "$model" --tokens "$prompt" --max-tokens 24
echo -n "CED path, greedy:   "
"$root/build/tools/ds41" generate --model "$model" --tokens "$prompt" --max-tokens 24 --mode ced
echo -n "sampled (T=0.8, top_p=0.95, seed 7): "
"$root/build/tools/ds41" generate --model "$model" --tokens "$prompt" --max-tokens 24 --temperature 0.8 --top-p 0.95 --seed 7
