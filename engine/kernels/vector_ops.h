// Small SIMD-dispatched vector kernels of attention, the indexer and mHC (docs/numerics.md): each
// keeps the canonical order (per-lane sequential block sums) or sums in float64, so every target
// gives the scalar bits.
#pragma once

#include <cstdint>

#include "engine/kernels/numerics.h"

namespace ds41 {

// scores[k * H + h] = canonical block dot of q_h and keys[k] over hd dims, for H heads and nkeys
// keys ([nkeys][hd]); qT is q transposed, [hd][H] (H a multiple of 16 is fastest; any H works).
void HeadScores(const float* qT, int H, int hd, const float* keys, int nkeys, float* scores);

// The indexer's score of each key (MODEL.md §6.6): score[k] = RoundBf16(float(0.0 + t_0 + ... +
// t_{H-1})) in float64, t_h = RoundBf16(max(RoundBf16(qk[k * H + h]), 0) * w[h]) (HeadScores' layout).
void IndexerKeyScores(const float* qk, int H, int nkeys, const float* w, float* score);

// One attention block's P.V for H heads in float64: pv[h * hd + d] = 0.0 + p[h * nk + k] * keys[k * hd + d]
// added for k = 0 .. nk - 1 in order (p [H][nk], keys [nk][hd]); hd a multiple of 32.
void BlockPv(const double* p, int H, int nk, const float* keys, int hd, double* pv);

// QDQ8 of `blocks` whole 32-blocks (Lin8's activations, MODEL.md §3): values[i] = the value of the
// E4M3 code QuantizeQdq8 gives x[i] (not scaled back), scales[b] = the block's scale. The scalar
// function's bits on every target (blocks with NaN or infinity take the scalar function).
void QuantizeQdq8Blocks(const float* x, int64_t blocks, float* values, float* scales);

// The ExponentRange of n bf16 values (zeros ignored; none nonzero: unknown).
ExponentRange Bf16ExponentRange(const uint16_t* v, int64_t n);

// x[i] = RoundBf16(x[i]) for i < n: the scalar function's bits (NaN stays a quiet NaN).
void RoundBf16InPlace(float* x, int64_t n);

// out[i] = ExpF(x[i]) for i < n, bit for bit on every target (engine/kernels/numerics.h's float(exp(double))).
void ExpFMany(const float* x, int64_t n, float* out);

// One 64-key block of attention's online softmax for H heads (MODEL.md §6.9): s [nk][H] the block's
// scaled scores; per head, m (running max) and l (running denominator) are updated in place, sf[h]
// = ExpF(old m - new m) is the factor the head's accumulators take, pb[h * nk + k] =
// RoundBf16(ExpF(s - new m)) (the probabilities P.V reads), and l = l * sf + float(the sum of the
// unrounded probabilities in float64, in k order).
void SoftmaxBlock(const float* s, int H, int nk, float* m, float* l, float* sf, double* pb);

// x[i] *= s for i < n (one rounding each: the scalar loop's bits).
void ScaleInPlace(float* x, int64_t n, float s);

// The attention accumulators' step after a block: acc[h * hd + d] = acc * sf[h] + float(pv[h * hd + d])
// (multiply, round, add, round: the scalar expression's bits) for H heads of hd values.
void RescaleAdd(float* acc, const float* sf, const double* pv, int H, int hd);

// Float64 dot of x (floats) and w (fp32 weights at possibly unaligned bytes) over K.
double DotF32Weights(const float* x, const uint8_t* w, int64_t K);
// Float64 sum of x[i]^2 for i < n: DotF32Weights of x with itself (the squares are exact; the order
// of the sum, which differs per SIMD target, moves only float64 rounding: docs/numerics.md).
double SumOfSquares(const float* x, int64_t n);

}  // namespace ds41
