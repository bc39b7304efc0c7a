// The tile-major weight copy: built once into the checkpoint folder and reused, rebuilt when a
// checkpoint file changes, built in memory where the folder cannot be written, and every mode gives
// the row-major kernels' bits (prefill and decode logits).
#include "engine/loading/weight_packing.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "engine/engine.h"
#include "engine/loading/model.h"
#include "engine/config/presets.h"
#include "engine/sampling.h"
#include "engine/kernels/vector_ops.h"
#include "tests/support/test_checkpoint.h"

namespace ds41 {
namespace {

namespace fs = std::filesystem;

std::vector<float> Logits(const Model& m) {
  Engine e(m);
  SequenceState st = SequenceState::Create(m.config());
  std::vector<int32_t> prompt(70);
  std::mt19937 rng(3);
  for (auto& t : prompt) t = 3 + static_cast<int32_t>(rng() % 400);
  std::vector<float> lg, all;
  EXPECT_TRUE(e.Prefill(&st, {prompt, {}, {}}, false, &lg).ok());
  all = lg;
  for (int i = 0; i < 4; ++i) {
    EXPECT_TRUE(e.DecodeBatch({&st}, {Argmax(&lg[lg.size() - m.config().vocab_size], m.config().vocab_size)}, &lg).ok());
    all.insert(all.end(), lg.begin(), lg.end());
  }
  return all;
}

std::unique_ptr<Model> Open(const std::string& dir, WeightTiles mode, const std::string& pack_dir = "") {
  auto m = Model::Open(dir, {mode, pack_dir});
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? std::move(*m) : nullptr;
}

TEST(WeightPackingTest, EveryModeGivesTheRowMajorBits) {
  const std::string dir = testing::WriteTestCheckpoint(TinyConfig(), 7, "pack-bits");
  auto off = Open(dir, WeightTiles::kOff);
  auto file = Open(dir, WeightTiles::kFile);
  auto memory = Open(dir, WeightTiles::kMemory);
  ASSERT_TRUE(off && file && memory);
  EXPECT_EQ(off->packed().bytes(), 0u);
  EXPECT_GT(file->packed().bytes(), 0u);
  EXPECT_NE(file->weights().layers[0].wq_a.tiles, nullptr);
  EXPECT_EQ(off->weights().layers[0].wq_a.tiles, nullptr);
  // A bound bf16 matmul weight knows its values' exponent range (the VDPBF16PS kernels' guard).
  const Bf16View& head = file->weights().head;
  EXPECT_EQ(Bf16ExponentRange(reinterpret_cast<const uint16_t*>(head.p), head.rows * head.cols).lo, head.exponents.lo);
  EXPECT_EQ(Bf16ExponentRange(reinterpret_cast<const uint16_t*>(head.p), head.rows * head.cols).hi, head.exponents.hi);
  EXPECT_TRUE(head.exponents.known());
  EXPECT_FALSE(off->weights().head.exponents.known());
  const auto a = Logits(*off), b = Logits(*file), c = Logits(*memory);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4)) << "file-backed tiles differ from row-major";
  EXPECT_EQ(0, std::memcmp(a.data(), c.data(), a.size() * 4)) << "in-memory tiles differ from row-major";
}

TEST(WeightPackingTest, FileIsBuiltOnceReusedAndRebuiltWhenTheCheckpointChanges) {
  const std::string dir = testing::WriteTestCheckpoint(TinyConfig(), 8, "pack-file");
  const fs::path tiles = fs::path(dir) / PackedWeights::kFileName;
  ASSERT_FALSE(fs::exists(tiles));
  {
    auto m = Open(dir, WeightTiles::kFile);
    EXPECT_NE(m->packed().summary().find("built now"), std::string::npos) << m->packed().summary();
  }
  ASSERT_TRUE(fs::exists(tiles));
  const auto built = fs::last_write_time(tiles);
  {
    auto m = Open(dir, WeightTiles::kFile);
    EXPECT_EQ(m->packed().summary().find("built now"), std::string::npos) << m->packed().summary();
  }
  EXPECT_EQ(fs::last_write_time(tiles), built) << "a matching tile file must be reused, not rewritten";
  // A shard rewritten (new modification time): the copy is stale and is rebuilt.
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".safetensors") fs::last_write_time(e.path(), built + std::chrono::seconds(5));
  {
    auto m = Open(dir, WeightTiles::kFile);
    EXPECT_NE(m->packed().summary().find("built now"), std::string::npos) << m->packed().summary();
  }
  // A damaged tile file (truncated) is never used.
  fs::resize_file(tiles, fs::file_size(tiles) / 2);
  {
    auto m = Open(dir, WeightTiles::kFile);
    EXPECT_NE(m->packed().summary().find("built now"), std::string::npos) << m->packed().summary();
  }
}

TEST(WeightPackingTest, UnwritableFolderFallsBackToMemory) {
  const std::string dir = testing::WriteTestCheckpoint(TinyConfig(), 9, "pack-ro");
  // A "folder" that is a regular file: no one, root included, can create the tile file there.
  auto m = Open(dir, WeightTiles::kFile, dir + "/config.json");
  EXPECT_NE(m->packed().summary().find("in memory"), std::string::npos) << m->packed().summary();
  EXPECT_NE(m->weights().layers[0].wq_a.tiles, nullptr);
}

TEST(WeightPackingTest, ModeNames) {
  EXPECT_EQ(ParseWeightTiles("file").value(), WeightTiles::kFile);
  EXPECT_EQ(ParseWeightTiles("memory").value(), WeightTiles::kMemory);
  EXPECT_EQ(ParseWeightTiles("off").value(), WeightTiles::kOff);
  EXPECT_FALSE(ParseWeightTiles("fast").ok());
}

}  // namespace
}  // namespace ds41
