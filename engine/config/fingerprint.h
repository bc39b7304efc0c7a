// The model fingerprint: what every cache unit and every node call is namespaced by, and what peers
// compare to check that they run the same model. Needs the config and the checkpoint's headers only,
// so roles that never run the model (the router, the cache service's tools) compute it without the
// engine's kernels.
#pragma once

#include <string>

#include "engine/config/config.h"
#include "engine/config/fp4_numerics.h"
#include "engine/loading/safetensors.h"
#include "util/status.h"

namespace ds41 {

// Hex SHA-256 over the config, every tensor's name, dtype and shape, and the bytes of every small
// tensor (norms, biases, mHC parameters): two checkpoints that differ in shape or seed differ here.
// The FP4 grid numerics are covered too (the canonical ones leave the digest as it always was).
std::string ModelFingerprint(const ModelConfig& config, const SafetensorsCheckpoint& checkpoint,
                             Fp4Numerics numerics);

struct ModelIdentity {
  ModelConfig config;
  std::string fingerprint;
};

// Reads `dir`/config.json and the checkpoint's headers (no weights are bound or packed); the
// numerics are the environment's (Fp4NumericsFromEnvironment), as the nodes' are.
StatusOr<ModelIdentity> ReadModelIdentity(const std::string& dir);

}  // namespace ds41
