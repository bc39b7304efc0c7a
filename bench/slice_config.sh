#!/usr/bin/env bash
# Writes the real-width slice used by engine_bench: the release's widths (hidden 5120, 64 heads of
# 512, q LoRA 1280, 8 output groups of 1024, experts 2304 wide, top-6, window 128, top-k 512, index
# 32x128) with 2 encoder + 2 decoder layers, 64 routed experts, a 32768-token vocabulary and small
# Engram tables, so it fits in memory, and the vision tower at real width with 2 of its 32 blocks
# (engine_bench --only vision: ms per block per image). 6.12 GiB as ds41-ckpt counts it.
#   slice_config.sh CKPT_TOOL OUT_DIR
set -euo pipefail
"$1" --preset release --out "$2" --seed 11 \
  --set num_hidden_layers=4 --set 'compress_ratios=[0,2,1,1]' \
  --set 'kv_source_layer_ids=[1,2]' --set 'index_source_layer_ids=[1,2,3]' --set candidate_source_layer_id=2 \
  --set n_routed_experts=64 --set vocab_size=32768 \
  --set 'engram_layer_ids=[1]' --set engram_vocab_size=4000 --set engram_compressed_vocab_size=16384 \
  --set num_nextn_predict_layers=0 \
  --set vision_config.num_hidden_layers=2 --set image_token_id=32000
