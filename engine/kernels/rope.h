// Rotary embedding tables (MODEL.md §6.2): interleaved pairs over the last rope_head_dim dims,
// theta 10000 without YaRN for ratio-0 layers, compress_rope_theta with YaRN for the others.
// Thread-safe: immutable after construction.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/config/config.h"

namespace ds41 {

class RopeTable {
 public:
  RopeTable() = default;
  // Frequencies in fp32 in the reference's order of operations; YaRN when `yarn`.
  RopeTable(const ModelConfig& config, bool yarn);

  const std::vector<float>& freqs() const { return freqs_; }  // [rope_dim / 2]
  int pairs() const { return static_cast<int>(freqs_.size()); }

  // cos/sin of fp32(pos) * freq for every pair: double evaluation, rounded to fp32 (canonical).
  void Angles(int64_t pos, float* cos_out, float* sin_out) const;

 private:
  std::vector<float> freqs_;
};

// Rotates the interleaved pairs of x[0 .. 2*pairs) (bf16-valued) by the given angles, rounding the
// result to bf16; `inverse` multiplies by the conjugate (output de-rotation, MODEL.md §6.9).
void ApplyRope(float* x, int pairs, const float* cos, const float* sin, bool inverse);

}  // namespace ds41
