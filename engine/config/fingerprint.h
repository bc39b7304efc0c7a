// The model fingerprint: what every cache unit and every node call is namespaced by, and what peers
// compare to check that they run the same model. Needs the config and the checkpoint's headers only,
// so roles that never run the model (the router, the cache service's tools) compute it without the
// engine's kernels.
#pragma once

#include <string>

#include "engine/config/config.h"
#include "engine/loading/safetensors.h"
#include "util/status.h"

namespace ds41 {

// Hex SHA-256 over the config, every tensor's name, dtype and shape, and the bytes of every small
// tensor (norms, biases, mHC parameters): two checkpoints that differ in shape or seed differ here.
std::string ModelFingerprint(const ModelConfig& config, const SafetensorsCheckpoint& checkpoint);

struct ModelIdentity {
  ModelConfig config;
  std::string fingerprint;
};

// Reads `dir`/config.json and the checkpoint's headers (no weights are bound or packed).
StatusOr<ModelIdentity> ReadModelIdentity(const std::string& dir);

}  // namespace ds41
