// Writes a checkpoint folder in exactly the release's published layout: HF config.json,
// model.safetensors.index.json with shards model-0000i-of-0000n.safetensors, the release's tensor
// names and FP8/MXFP4/BF16/F32 encodings, and engram_token_map.json. Contents are synthetic
// (ckpt/tensor_init.h), seeded, with realistic magnitudes.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "engine/config/config.h"
#include "util/status.h"

namespace ds41 {

struct WriteProgress {
  uint64_t bytes_done = 0, bytes_total = 0;
  int tensors_done = 0, tensors_total = 0;
  std::string current;  // tensor being written
};

struct CheckpointWriteOptions {
  std::string out_dir;
  uint64_t seed = 0;
  uint64_t shard_bytes = uint64_t{2} << 30;  // a tensor never spans shards
  std::function<void(const WriteProgress&)> progress;  // called after each tensor
};

Status WriteCheckpoint(const ModelConfig& config, const CheckpointWriteOptions& options);

// Recomputes engram_num_embeddings from the bucket primes (what a config built by hand needs).
Status FillEngramRowCounts(ModelConfig* config);

}  // namespace ds41
