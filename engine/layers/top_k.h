// The indexer's top-k selection (MODEL.md §6.6-6.7).
#pragma once

#include <cstdint>
#include <vector>

namespace ds41 {

// The indices of the k best scores, in ascending index order: higher scores first, the lower index
// on equal scores (-0 equals +0); -inf and NaN are never chosen. Fewer than k when fewer qualify.
std::vector<int32_t> TopKByScore(const std::vector<float>& score, int k);

}  // namespace ds41
