// Minimal NumPy .npy (format 1.0) writer for float32, uint8 and int32 arrays.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "util/status.h"

namespace ds41 {

Status WriteNpy(const std::string& path, const std::vector<int64_t>& shape, const float* data);
Status WriteNpy(const std::string& path, const std::vector<int64_t>& shape, const uint8_t* data);
Status WriteNpy(const std::string& path, const std::vector<int64_t>& shape, const int32_t* data);

}  // namespace ds41
