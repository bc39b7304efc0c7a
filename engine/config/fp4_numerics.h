// Which numerics Lin8 uses against MXFP4 weights (engine/kernels/kernels.h, docs/numerics.md): part of
// the model's identity, because the two give different bits, so nodes that differ in it must not
// share cache units nor serve one router (engine/config/fingerprint.h covers it).
#pragma once

#include "util/status.h"

namespace ds41 {

// kCanonical: the canonical order on the E4M3 activation codes. kGrid: the codes rounded to
// multiples of 1/64 first (engine/kernels/matmul_grid.h).
enum class Fp4Numerics { kCanonical, kGrid };

// The environment's DS41_FP4_NUMERICS: unset, empty or "canonical", or "grid"; anything else is
// InvalidArgument (a typo must not quietly pick the other numerics).
StatusOr<Fp4Numerics> Fp4NumericsFromEnvironment();
const char* Fp4NumericsName(Fp4Numerics n);

}  // namespace ds41
