// Model: a checkpoint folder opened for inference: config, mapped weights and the tables derived
// from them (RoPE, Engram layout, compressed-token map). Thread-safe: immutable after Open().
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/config/config.h"
#include "engine/loading/engram_layout.h"
#include "engine/kernels/rope.h"
#include "engine/loading/safetensors.h"
#include "engine/loading/weight_packing.h"
#include "engine/loading/weights.h"
#include "util/status.h"

namespace ds41 {

struct ModelOptions {
  // Tile-major weight copies for the SIMD matmuls (engine/loading/weight_packing.h); kOff where the model
  // only tokenizes (the router).
  WeightTiles weight_tiles = WeightTiles::kFile;
  std::string pack_dir;  // where kFile keeps ds41-tiles.bin; empty: the checkpoint folder
};

class Model {
 public:
  // Opens `dir` (config.json, safetensors, engram_token_map.json when Engram is configured).
  static StatusOr<std::unique_ptr<Model>> Open(const std::string& dir, const ModelOptions& options = {});

  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }
  const EngramLayout& engram() const { return engram_; }
  const std::vector<int32_t>& engram_token_map() const { return token_map_; }
  const RopeTable& rope(bool yarn) const { return yarn ? rope_yarn_ : rope_plain_; }
  const std::string& dir() const { return dir_; }
  size_t mapped_bytes() const { return ckpt_.mapped_bytes(); }
  const PackedWeights& packed() const { return packed_; }

  // engine/config/fingerprint.h: namespaces caches, checks that peers run the same model.
  const std::string& fingerprint() const { return fingerprint_; }

 private:
  Model() = default;

  std::string dir_;
  ModelConfig config_;
  SafetensorsCheckpoint ckpt_;
  ModelWeights weights_;
  PackedWeights packed_;
  EngramLayout engram_;
  std::vector<int32_t> token_map_;
  RopeTable rope_plain_, rope_yarn_;
  std::string fingerprint_;
};

}  // namespace ds41
