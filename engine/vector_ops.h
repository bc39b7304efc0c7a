// Small SIMD-dispatched vector kernels of attention, the indexer and mHC (docs/numerics.md): each
// keeps the canonical order (per-lane sequential block sums) or sums in float64, so every target
// gives the scalar bits.
#pragma once

#include <cstdint>

namespace ds41 {

// scores[h] = canonical block dot of q_h and key over hd dims, for H heads; qT is q transposed,
// [hd][H] (H a multiple of 16 is fastest; any H works).
void HeadScores(const float* qT, int H, int hd, const float* key, float* scores);

// pv[d] += p * key[d] in float64 for d in [0, hd).
void AccumulatePv(double p, const float* key, double* pv, int hd);

// Float64 dot of x (floats) and w (fp32 weights at possibly unaligned bytes) over K.
double DotF32Weights(const float* x, const uint8_t* w, int64_t K);

}  // namespace ds41
