// The one table of every tensor the engine reads: name, storage format, logical shape, whether it
// is required, and how the checkpoint tool initializes it. Loading, validation and the test
// checkpoints are all driven by it (STYLE.md §2).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/config/config.h"
#include "engine/loading/safetensors.h"

namespace ds41 {

enum class TensorFormat {
  kBf16,
  kF32,
  kFp8Linear,  // F8_E4M3 [out, in] + F8_E8M0 .scale [ceil(out/32), ceil(in/32)]
  kFp4Linear,  // I8 [out, in/2] (two E2M1 per byte, even element low) + F8_E8M0 .scale [out, in/32]
  kFp8Rows,    // F8_E4M3 [rows, d] + F8_E8M0 .scale [rows, d/32] (Engram table)
};

// How the checkpoint tool fills a tensor (statistics of the released checkpoint, MODEL.md §12).
struct InitHint {
  enum Kind { kNorm, kEmbedding, kProjection, kSmall, kEngramTable, kRouterBias } kind = kProjection;
  double value = 1.0;  // norm mean, embedding std, or gain on fan_in^-1/2
};

struct TensorSpec {
  std::string name;            // stored name of the data tensor
  TensorFormat format = TensorFormat::kBf16;
  std::vector<int64_t> shape;  // logical shape; [out, in] for linears
  bool required = true;
  InitHint init;
};

// "x.weight" -> "x.scale" (the suffix replaces .weight; MODEL.md §2.1).
std::string ScaleName(const std::string& weight_name);

// Stored (dtype, shape) of the data tensor and, for quantized formats, of its scale companion.
struct StoredTensor {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
};
std::vector<StoredTensor> StoredTensors(const TensorSpec& spec);

// Every tensor the engine reads (globals, then the backbone layer by layer, then the DSpark layers
// mtp.0.. and the vision tower when configured), in a stable order.
void ForEachTensor(const ModelConfig& config, const std::function<void(const TensorSpec&)>& fn);

// Names the engine never reads but the release ships (the vision tower's when `config` has no
// vision, DSpark's mtp.* when it has no DSpark layers); present tensors with these prefixes are
// accepted and ignored.
bool IsIgnoredTensorName(const ModelConfig& config, const std::string& name);

}  // namespace ds41
