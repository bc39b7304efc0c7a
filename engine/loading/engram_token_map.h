// engram_token_map.json: the checkpoint's map from token id to Engram compressed id (MODEL.md §8.1).
// Parsed without the engine (it lives in ds41_engine_config), so its fuzz harness links no kernel.
// Thread-safe: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/config/config.h"
#include "util/status.h"

namespace ds41 {

// Parses the file's text: a JSON list of vocab_size integers in [0, engram_compressed_vocab_size)
// whose distinct count equals engram_compressed_vocab_size (the release asserts this; every
// multiplier derives from it). INVALID_ARGUMENT naming `path` and the entry otherwise.
StatusOr<std::vector<int32_t>> ParseEngramTokenMap(std::string_view text, const ModelConfig& config,
                                                   const std::string& path);
// Reads `path` and parses it; NOT_FOUND when the file is missing.
StatusOr<std::vector<int32_t>> LoadEngramTokenMap(const std::string& path, const ModelConfig& config);

}  // namespace ds41
