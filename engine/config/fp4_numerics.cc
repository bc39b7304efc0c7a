#include "engine/config/fp4_numerics.h"

#include <cstdlib>
#include <string>

namespace ds41 {

StatusOr<Fp4Numerics> Fp4NumericsFromEnvironment() {
  const char* e = std::getenv("DS41_FP4_NUMERICS");
  const std::string v = e == nullptr ? "" : e;
  if (v.empty() || v == "canonical") return Fp4Numerics::kCanonical;
  if (v == "grid") return Fp4Numerics::kGrid;
  return InvalidArgumentError("DS41_FP4_NUMERICS=\"" + v + "\": expected canonical or grid");
}

const char* Fp4NumericsName(Fp4Numerics n) { return n == Fp4Numerics::kGrid ? "grid" : "canonical"; }

}  // namespace ds41
