// Tile-major copies of a checkpoint's FP8 and FP4 matmul weights (engine/loading/weight_tiles.h), the
// layout the SIMD kernels read without transposing. Built once per checkpoint into a file beside it
// and memory-mapped like the checkpoint itself (shared by every process on the machine); where that
// folder is read-only, built in memory. The file names the checkpoint files it was made from (size
// and modification time), so a changed checkpoint is repacked, never served stale.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "engine/loading/safetensors.h"
#include "engine/loading/weights.h"
#include "util/mapped_file.h"
#include "util/status.h"

namespace ds41 {

enum class WeightTiles {
  kFile,    // map <pack dir>/ds41-tiles.bin, building it when missing or stale (memory if unwritable)
  kMemory,  // build in anonymous memory, every time
  kOff,     // row-major codes only (the transposing kernels)
};
StatusOr<WeightTiles> ParseWeightTiles(const std::string& s);  // "file", "memory", "off"

class PackedWeights {
 public:
  static constexpr const char* kFileName = "ds41-tiles.bin";

  // Points every FP8/FP4 matmul weight of `w` at its tile-major copy. `pack_dir` empty: `ckpt_dir`.
  static StatusOr<PackedWeights> Bind(const std::string& ckpt_dir, const SafetensorsCheckpoint& ckpt, ModelWeights* w,
                                      WeightTiles mode, const std::string& pack_dir = "");

  PackedWeights() = default;
  PackedWeights(PackedWeights&&) noexcept = default;
  PackedWeights& operator=(PackedWeights&&) noexcept = default;

  size_t bytes() const { return bytes_; }
  // "off", "memory (N GiB)", "mapped from PATH (N GiB)" and whether it was built now.
  const std::string& summary() const { return summary_; }

 private:
  struct Anonymous;
  MappedFile file_;
  std::shared_ptr<Anonymous> memory_;
  size_t bytes_ = 0;
  std::string summary_ = "off";
};

}  // namespace ds41
