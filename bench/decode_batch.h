// A batch of sequences decoding greedily, for the benchmarks that time decode steps (engine_bench's
// batched decode, grammar_bench's share of a step): each sequence prefilled with its own 16 random
// tokens, then every Step feeds each sequence its argmax token.
#pragma once

#include <vector>

#include "engine/engine.h"
#include "util/status.h"

namespace ds41 {

class DecodeBatch {
 public:
  // `batch` sequences of `engine`'s model, prefilled (prompt seeds seed, seed + 1, ...).
  static StatusOr<DecodeBatch> Create(Engine& engine, const ModelConfig& config, int batch, int seed);
  // One decode step of every sequence.
  Status Step();

 private:
  DecodeBatch(Engine& engine, const ModelConfig& config) : engine_(&engine), config_(&config) {}
  Engine* engine_;
  const ModelConfig* config_;
  std::vector<SequenceState> states_;
  std::vector<float> logits_;  // [batch, vocab] of the last step (or the prefills)
};

}  // namespace ds41
