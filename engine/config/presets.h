// Model configurations the project knows by name: the release's published text_config
// (MODEL.md §1.1) and the tiny test configuration (§12). Both are validated before return.
#pragma once

#include <string>
#include <vector>

#include "engine/config/config.h"
#include "util/status.h"

namespace ds41 {

ModelConfig ReleaseConfig();  // DeepSeek-V4.1-Flash as published (40 layers, 5120 wide)
ModelConfig TinyConfig();     // 8 layers, 256 wide: every mechanism at toy size
ModelConfig SmallConfig();    // tiny's width with the release's window, top-k and candidate pool
ModelConfig TinyDsparkConfig();  // tiny + 3 DSpark layers over layers 5-7 (MODEL.md §9.3)
ModelConfig TinyVisionConfig();  // tiny + a 2-block, 64-wide vision tower (MODEL.md §2.5, §9.2)

// "release", "tiny", ... ; NotFound for an unknown name.
StatusOr<ModelConfig> PresetConfig(const std::string& name);
std::vector<std::string> PresetNames();

}  // namespace ds41
