// Surface: a checkpoint's safetensors files (engine/loading/safetensors.h): each shard's header
// (its 8-byte length, the JSON entries: dtype, shape, data offsets) over the shard's bytes, and
// model.safetensors.index.json, which names the shard of every tensor.
//
// Input: byte 0 bit 0 picks the file (0: a shard, 1: the index); the rest is its bytes.
// Properties: no crash or exception; every tensor view of an accepted shard lies inside the
// shard's data and its size agrees with its shape and dtype; every shard the index names is a
// plain file name (no path can escape the model folder).
#include "engine/loading/safetensors.h"
#include "fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t* bytes = data + 1;
  const size_t n = size - 1;
  if (data[0] & 1) {
    auto index = ds41::ParseSafetensorsIndex(std::string_view(reinterpret_cast<const char*>(bytes), n), "index.json");
    if (!index.ok()) return 0;
    for (const auto& [tensor, file] : *index) {
      DS41_FUZZ_CHECK(!file.empty() && file.find('/') == std::string::npos && file != "." && file != "..");
    }
    return 0;
  }
  auto views = ds41::ParseSafetensorsShard(bytes, n, "shard.safetensors");
  if (!views.ok()) return 0;
  for (const ds41::TensorView& v : *views) {
    DS41_FUZZ_CHECK(v.data >= bytes + 8 && v.data + v.nbytes <= bytes + n);
    const int esize = ds41::DTypeSize(v.dtype);
    if (esize == 0) continue;
    uint64_t elems = 1;
    for (int64_t d : v.shape) {
      DS41_FUZZ_CHECK(d >= 0);
      elems *= static_cast<uint64_t>(d);
    }
    DS41_FUZZ_CHECK(elems * static_cast<uint64_t>(esize) == v.nbytes);
    // Touch the first and last byte, as a loader would: ASan reports a view past the input.
    if (v.nbytes > 0) DS41_FUZZ_CHECK((v.data[0] | v.data[v.nbytes - 1]) >= 0);
  }
  return 0;
}
