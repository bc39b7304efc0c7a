// Read-only access to a checkpoint folder in the release's layout: model.safetensors.index.json
// plus shards (or a single model.safetensors), every shard memory-mapped, never copied.
//
// Thread-safe after Open(): all accessors are const.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "util/mapped_file.h"
#include "util/status.h"

namespace ds41 {

enum class DType { kF8E4M3, kF8E8M0, kI8, kBF16, kF32, kOther };

std::string_view DTypeName(DType t);
DType DTypeFromName(std::string_view name);
int DTypeSize(DType t);  // bytes per element; 0 for kOther

struct TensorView {
  std::string name;
  DType dtype = DType::kOther;
  std::string dtype_name;      // as spelled in the header
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;  // valid while the Checkpoint lives
  size_t nbytes = 0;
  std::string file;            // shard file name

  std::string Describe() const;  // "F8_E4M3 [512, 4096]"
};

// The parsers Open runs on each file, on bytes already in memory (the fuzz harness feeds them
// arbitrary bytes). Pure; thread-safe.
//
// One shard: the 8-byte little-endian header length, the JSON header, the data. Every entry is
// checked (dtype, shape, offsets inside the data, size agreeing with the shape); the views point
// into `bytes`. DATA_LOSS naming `file` and the tensor.
StatusOr<std::vector<TensorView>> ParseSafetensorsShard(const uint8_t* bytes, size_t size, const std::string& file);
// model.safetensors.index.json: each tensor's shard, in the index's order; every shard a plain
// file name (no '/', ".", ".."). DATA_LOSS naming `path` otherwise.
StatusOr<std::vector<std::pair<std::string, std::string>>> ParseSafetensorsIndex(std::string_view text,
                                                                                  const std::string& path);

class SafetensorsCheckpoint {
 public:
  // Opens `dir`/model.safetensors.index.json and its shards, or `dir`/model.safetensors. Every header
  // is checked: a truncated shard, an offset outside its file, a size that disagrees with the shape, a
  // tensor listed in the index but absent from its shard, or a name in two shards is refused with a
  // message naming the tensor and the file.
  static StatusOr<SafetensorsCheckpoint> Open(const std::string& dir);

  // nullptr when absent.
  const TensorView* Find(const std::string& name) const;
  const std::unordered_map<std::string, TensorView>& tensors() const { return tensors_; }
  size_t mapped_bytes() const;
  const std::vector<MappedFile>& files() const { return files_; }

 private:
  Status AddShard(const std::string& dir, const std::string& file);

  std::vector<MappedFile> files_;
  std::unordered_map<std::string, TensorView> tensors_;
};

}  // namespace ds41
