// The slice of numpy's random machinery the release uses to derive Engram hash multipliers:
// SeedSequence -> PCG64 -> Generator.integers(0, high, dtype=int64) (Lemire's bounded method).
// MODEL.md §8.3 and §11 item 10: numpy does not promise this stream is stable, so the engine
// reproduces numpy 1.24's algorithm and tests pin the published constants.
#pragma once

#include <cstdint>
#include <vector>

#include "util/int128.h"
#include "util/status.h"

namespace ds41 {

class NumpyPcg64 {
 public:
  // Equivalent of numpy.random.default_rng(seed) for a non-negative integer seed.
  explicit NumpyPcg64(uint64_t seed);

  uint64_t NextU64();

  // Generator.integers(0, high, size=n, dtype=np.int64). InvalidArgument when high <= 2^32 (the
  // buffered 32-bit path, which no Engram configuration reaches) or high < 1.
  StatusOr<std::vector<int64_t>> Integers(int64_t high, int n);

 private:
  uint128 state_ = 0;
  uint128 inc_ = 0;
};

}  // namespace ds41
