// The loader refuses every malformed checkpoint with a message that names the problem, and never
// crashes: missing, misnamed and mis-shaped tensors, truncated shards, broken headers and configs.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <nlohmann/json.hpp>

#include "engine/config/fingerprint.h"
#include "engine/config/presets.h"
#include "engine/kernels/kernels.h"
#include "engine/loading/model.h"
#include "tests/support/test_checkpoint.h"
#include "util/mapped_file.h"

namespace ds41 {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

class LoaderTest : public ::testing::Test {
 protected:
  // A private copy of the tiny checkpoint.
  void SetUp() override {
    dir_ = testing::TempDir("loader");
    for (const auto& e : fs::directory_iterator(testing::TinyCheckpoint()))
      fs::copy_file(e.path(), fs::path(dir_) / e.path().filename(), fs::copy_options::overwrite_existing);
    for (const auto& e : fs::directory_iterator(dir_))
      if (e.path().extension() == ".safetensors") shard_ = e.path().string();
  }

  // Rewrites the shard header through `edit` (data bytes unchanged) and the index accordingly.
  void EditHeader(const std::function<void(json&)>& edit) {
    std::string blob = *ReadFileToString(shard_);
    uint64_t n = 0;
    for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(static_cast<uint8_t>(blob[i])) << (8 * i);
    json h = json::parse(blob.substr(8, n));
    edit(h);
    std::string hs = h.dump();
    while ((hs.size() + 8) % 8) hs.push_back(' ');
    std::string out(8, '\0');
    for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((hs.size() >> (8 * i)) & 0xFF);
    out += hs + blob.substr(8 + n);
    ASSERT_TRUE(WriteStringToFile(shard_, out).ok());
    json index;
    index["weight_map"] = json::object();
    for (auto it = h.begin(); it != h.end(); ++it)
      if (it.key() != "__metadata__") index["weight_map"][it.key()] = fs::path(shard_).filename().string();
    ASSERT_TRUE(WriteStringToFile(dir_ + "/model.safetensors.index.json", index.dump()).ok());
  }

  // Opens the folder and expects a failure whose message contains every needle.
  void ExpectRefused(const std::vector<std::string>& needles) {
    auto m = Model::Open(dir_);
    ASSERT_FALSE(m.ok()) << "a broken checkpoint was accepted";
    for (const auto& n : needles) EXPECT_NE(m.status().message().find(n), std::string::npos) << m.status().ToString();
  }

  std::string dir_, shard_;
};

TEST_F(LoaderTest, IntactCheckpointOpens) {
  auto m = Model::Open(dir_);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ((*m)->config().n_layers, 8);
  EXPECT_EQ((*m)->fingerprint().size(), 64u);
}

// The FP4 numerics are part of the model's identity: nodes that differ in them get different
// fingerprints (so the router refuses the odd one and their cache units stay apart), the router's
// reading of the identity agrees with the node's, and a value that is not one is refused.
// Saves DS41_FP4_NUMERICS and the kernels' numerics, starts from canonical, and puts both back.
class Fp4NumericsGuard {
 public:
  Fp4NumericsGuard() : numerics_(Fp4NumericsInUse()) {
    if (const char* e = std::getenv(kVar)) saved_ = e;
    unsetenv(kVar);
    SetFp4Numerics(Fp4Numerics::kCanonical);
  }
  ~Fp4NumericsGuard() {
    if (saved_) setenv(kVar, saved_->c_str(), 1); else unsetenv(kVar);
    SetFp4Numerics(numerics_);
  }

 private:
  static constexpr const char* kVar = "DS41_FP4_NUMERICS";
  std::optional<std::string> saved_;
  Fp4Numerics numerics_;
};

TEST_F(LoaderTest, TheFingerprintCoversTheFp4Numerics) {
  const Fp4NumericsGuard guard;
  auto canonical = Model::Open(dir_);
  ASSERT_TRUE(canonical.ok()) << canonical.status().ToString();
  SetFp4Numerics(Fp4Numerics::kGrid);
  auto grid = Model::Open(dir_);
  SetFp4Numerics(Fp4Numerics::kCanonical);
  ASSERT_TRUE(grid.ok()) << grid.status().ToString();
  EXPECT_NE((*canonical)->fingerprint(), (*grid)->fingerprint());
  auto id = ReadModelIdentity(dir_);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  EXPECT_EQ(id->fingerprint, (*canonical)->fingerprint());

  ASSERT_EQ(0, setenv("DS41_FP4_NUMERICS", "grid", 1));
  id = ReadModelIdentity(dir_);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  EXPECT_EQ(id->fingerprint, (*grid)->fingerprint());
  ASSERT_EQ(0, setenv("DS41_FP4_NUMERICS", "gird", 1));
  ExpectRefused({"DS41_FP4_NUMERICS=\"gird\"", "canonical or grid"});
  EXPECT_FALSE(ReadModelIdentity(dir_).ok());
}

TEST_F(LoaderTest, MissingTensorIsNamed) {
  EditHeader([](json& h) { h.erase("layers.3.attn.wq_a.weight"); });
  ExpectRefused({"missing tensor layers.3.attn.wq_a.weight", "F8_E4M3 [64, 256]"});
}

TEST_F(LoaderTest, MisnamedTensorIsNamed) {
  EditHeader([](json& h) {
    h["layers.3.attn.wqa.weight"] = h["layers.3.attn.wq_a.weight"];
    h.erase("layers.3.attn.wq_a.weight");
  });
  ExpectRefused({"layers.3.attn.wq_a.weight"});
}

TEST_F(LoaderTest, UnexpectedTensorIsNamed) {
  EditHeader([](json& h) { h["layers.3.attn.extra.weight"] = h["layers.3.attn.kv_norm.weight"]; });
  ExpectRefused({"unexpected tensor layers.3.attn.extra.weight"});
}

TEST_F(LoaderTest, MisshapedTensorIsNamed) {
  EditHeader([](json& h) { h["layers.2.attn.wkv.weight"]["shape"] = {256, 128}; });
  ExpectRefused({"layers.2.attn.wkv.weight", "expected F8_E4M3 [128, 256]", "found F8_E4M3 [256, 128]"});
}

TEST_F(LoaderTest, WrongDtypeIsNamed) {
  EditHeader([](json& h) { h["norm.weight"]["dtype"] = "F16"; });
  ExpectRefused({"norm.weight"});
}

TEST_F(LoaderTest, TruncatedShardIsRefused) {
  std::string blob = *ReadFileToString(shard_);
  ASSERT_TRUE(WriteStringToFile(shard_, blob.substr(0, blob.size() - 1000)).ok());
  ExpectRefused({"truncated"});
  ASSERT_TRUE(WriteStringToFile(shard_, blob.substr(0, 5)).ok());
  ExpectRefused({"truncated"});
  ASSERT_TRUE(WriteStringToFile(shard_, "\xff\xff\xff\xff\xff\xff\xff\x7f{}").ok());
  ExpectRefused({"header length"});
}

TEST_F(LoaderTest, BrokenHeaderIsRefused) {
  std::string blob = *ReadFileToString(shard_);
  blob[9] = '[';
  blob[10] = ']';
  ASSERT_TRUE(WriteStringToFile(shard_, blob).ok());
  ExpectRefused({"header"});
}

TEST_F(LoaderTest, IndexPointingAtTheWrongShardIsRefused) {
  json index = json::parse(*ReadFileToString(dir_ + "/model.safetensors.index.json"));
  index["weight_map"]["norm.weight"] = "../../etc/passwd";
  ASSERT_TRUE(WriteStringToFile(dir_ + "/model.safetensors.index.json", index.dump()).ok());
  ExpectRefused({"norm.weight", "not a plain file name"});
  index["weight_map"]["norm.weight"] = "model-00009-of-00009.safetensors";
  ASSERT_TRUE(WriteStringToFile(dir_ + "/model.safetensors.index.json", index.dump()).ok());
  ExpectRefused({"model-00009-of-00009.safetensors"});
}

TEST_F(LoaderTest, InconsistentConfigIsRefused) {
  json c = json::parse(*ReadFileToString(dir_ + "/config.json"));
  c["text_config"]["engram_num_embeddings"] = {6126, 6333};
  ASSERT_TRUE(WriteStringToFile(dir_ + "/config.json", c.dump()).ok());
  ExpectRefused({"engram_num_embeddings[1]"});
  c["text_config"]["engram_num_embeddings"] = {6126, 6332};
  c["text_config"]["hidden_size"] = 512;
  ASSERT_TRUE(WriteStringToFile(dir_ + "/config.json", c.dump()).ok());
  ExpectRefused({"embed.weight", "[512, 512]"});
  ASSERT_TRUE(WriteStringToFile(dir_ + "/config.json", "{\"text_config\": 3}").ok());
  ExpectRefused({"quantization_config"});
}

TEST_F(LoaderTest, EngramTokenMapIsChecked) {
  fs::remove(dir_ + "/engram_token_map.json");
  ExpectRefused({"engram_token_map.json"});
  ASSERT_TRUE(WriteStringToFile(dir_ + "/engram_token_map.json", "[1, 2, 3]").ok());
  ExpectRefused({"vocab_size"});
  std::vector<int> map(512, 0);
  ASSERT_TRUE(WriteStringToFile(dir_ + "/engram_token_map.json", json(map).dump()).ok());
  ExpectRefused({"distinct"});
}

TEST_F(LoaderTest, MissingFolderIsNotFound) {
  auto m = Model::Open(dir_ + "/nope");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace ds41
