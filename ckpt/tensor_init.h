// Deterministic synthetic tensor contents in the checkpoint's storage formats, with the statistics
// of the released checkpoint (MODEL.md §12): every tensor is a function of (seed, name) alone, so a
// checkpoint's bytes do not depend on sharding or write order.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/loading/tensor_table.h"

namespace ds41 {

// Stored bytes of `spec`: the data tensor and, for quantized formats, its scale companion.
struct GeneratedTensor {
  std::vector<uint8_t> data;
  std::vector<uint8_t> scale;  // empty for BF16/F32
};

GeneratedTensor GenerateTensor(const TensorSpec& spec, uint64_t seed);

// Compressed-token map for a synthetic vocabulary: c(t) = floor(t * compressed / vocab), which for
// the tiny config is the t div 2 rule of MODEL.md §12 and covers every compressed id.
std::vector<int32_t> SyntheticEngramTokenMap(int vocab_size, int compressed_vocab_size);

}  // namespace ds41
