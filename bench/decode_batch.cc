#include "bench/decode_batch.h"

#include <algorithm>
#include <random>

#include "engine/sampling.h"

namespace ds41 {

StatusOr<DecodeBatch> DecodeBatch::Create(Engine& engine, const ModelConfig& config, int batch, int seed) {
  DecodeBatch d(engine, config);
  const size_t V = static_cast<size_t>(config.vocab_size);
  d.logits_.resize(static_cast<size_t>(batch) * V);
  d.states_.reserve(static_cast<size_t>(batch));
  for (int b = 0; b < batch; ++b) {
    std::mt19937 rng(static_cast<uint32_t>(seed + b));
    std::vector<int32_t> prompt(16);
    for (int32_t& t : prompt) t = 3 + static_cast<int32_t>(rng() % static_cast<uint32_t>(config.vocab_size - 3));
    d.states_.push_back(SequenceState::Create(config));
    std::vector<float> lg;
    DS41_RETURN_IF_ERROR(engine.Prefill(&d.states_.back(), {prompt, {}, {}}, false, &lg));
    std::copy(lg.begin(), lg.begin() + static_cast<std::ptrdiff_t>(V), d.logits_.begin() + static_cast<std::ptrdiff_t>(b * V));
  }
  return d;
}

Status DecodeBatch::Step() {
  const int V = config_->vocab_size;
  std::vector<SequenceState*> ptrs;
  std::vector<int32_t> next;
  for (size_t b = 0; b < states_.size(); ++b) {
    ptrs.push_back(&states_[b]);
    next.push_back(Argmax(&logits_[b * static_cast<size_t>(V)], V));
  }
  return engine_->DecodeBatch(ptrs, next, &logits_);
}

}  // namespace ds41
