#include "util/npy.h"

#include <cstring>

#include "util/mapped_file.h"

namespace ds41 {
namespace {

Status Write(const std::string& path, const std::vector<int64_t>& shape, const char* descr, const void* data,
             size_t elem) {
  std::string dims;
  size_t n = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    dims += std::to_string(shape[i]) + (shape.size() == 1 ? "," : (i + 1 < shape.size() ? ", " : ""));
    n *= static_cast<size_t>(shape[i]);
  }
  std::string header = "{'descr': '" + std::string(descr) + "', 'fortran_order': False, 'shape': (" + dims + "), }";
  while ((10 + header.size() + 1) % 64 != 0) header.push_back(' ');
  header.push_back('\n');
  std::string out = "\x93NUMPY";
  out.push_back(1);
  out.push_back(0);
  out.push_back(static_cast<char>(header.size() & 0xFF));
  out.push_back(static_cast<char>(header.size() >> 8));
  out += header;
  out.append(static_cast<const char*>(data), n * elem);
  return WriteStringToFile(path, out);
}

}  // namespace

Status WriteNpy(const std::string& path, const std::vector<int64_t>& shape, const float* data) {
  return Write(path, shape, "<f4", data, 4);
}
Status WriteNpy(const std::string& path, const std::vector<int64_t>& shape, const uint8_t* data) {
  return Write(path, shape, "|u1", data, 1);
}
Status WriteNpy(const std::string& path, const std::vector<int64_t>& shape, const int32_t* data) {
  return Write(path, shape, "<i4", data, 4);
}

}  // namespace ds41
