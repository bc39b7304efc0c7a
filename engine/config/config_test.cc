#include "engine/config/config.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "engine/config/presets.h"

namespace ds41 {
namespace {

TEST(ConfigTest, ReleaseLayerMapMatchesTheSpec) {
  ModelConfig c = ReleaseConfig();
  int window_only = 0, full = 0, reindex = 0, reuse = 0;
  for (const LayerRole& r : c.roles) {
    window_only += r.mode == AttnMode::kWindowOnly;
    full += r.mode == AttnMode::kFull;
    reindex += r.mode == AttnMode::kReindex;
    reuse += r.mode == AttnMode::kReuse;
  }
  EXPECT_EQ(window_only, 2);
  EXPECT_EQ(full, 4);
  EXPECT_EQ(reindex, 4);
  EXPECT_EQ(reuse, 30);
  EXPECT_EQ(c.roles[7].kv_source, 2);
  EXPECT_EQ(c.roles[13].topk_source, 8);
  EXPECT_EQ(c.roles[27].kv_source, 20);
  EXPECT_EQ(c.roles[27].topk_source, 24);
  EXPECT_TRUE(c.roles[20].candidate_publisher);
  for (int L : {24, 28, 32, 36}) EXPECT_TRUE(c.roles[L].candidate_consumer) << L;
  for (int L : {2, 8, 14, 20, 21}) EXPECT_FALSE(c.roles[L].candidate_consumer) << L;
  EXPECT_FALSE(c.roles[0].yarn);
  EXPECT_TRUE(c.roles[2].yarn);
  EXPECT_EQ(c.roles[1].engram_slot, 0);
  EXPECT_EQ(c.roles[14].engram_slot, 1);
  EXPECT_EQ(c.ced_split, 20);
  EXPECT_TRUE(c.ced_capable);
  // 890 bytes of global KV per token (MODEL.md §10.2).
  EXPECT_EQ(c.main_kv_bytes(), 288);
  EXPECT_EQ(c.index_key_bytes(), 68);
  EXPECT_EQ(c.window_entry_bytes(), 528);
}

TEST(ConfigTest, TinyLayerMap) {
  ModelConfig c = TinyConfig();
  EXPECT_EQ(c.roles[0].mode, AttnMode::kWindowOnly);
  EXPECT_EQ(c.roles[1].mode, AttnMode::kFull);
  EXPECT_EQ(c.roles[2].mode, AttnMode::kReuse);
  EXPECT_EQ(c.roles[2].kv_source, 1);
  EXPECT_EQ(c.roles[3].mode, AttnMode::kFull);
  EXPECT_EQ(c.roles[4].mode, AttnMode::kFull);
  EXPECT_TRUE(c.roles[4].candidate_publisher);
  EXPECT_EQ(c.roles[5].topk_source, 4);
  EXPECT_EQ(c.roles[6].mode, AttnMode::kReindex);
  EXPECT_TRUE(c.roles[6].candidate_consumer);
  EXPECT_EQ(c.roles[7].topk_source, 6);
  EXPECT_EQ(c.roles[7].kv_source, 4);
  EXPECT_EQ(c.ced_split, 4);
  EXPECT_TRUE(c.ced_capable);
}

TEST(ConfigTest, JsonRoundTrip) {
  for (const ModelConfig& c : {ReleaseConfig(), TinyConfig()}) {
    auto back = ModelConfig::FromJson(c.ToJson());
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(back->ToJson(), c.ToJson());
    EXPECT_EQ(back->compress_ratios, c.compress_ratios);
    EXPECT_EQ(back->norm_eps, c.norm_eps);
  }
}

// Edits the tiny config's JSON and expects a refusal whose message contains `needle`.
void ExpectRefused(const std::function<void(nlohmann::json&)>& edit, const std::string& needle) {
  nlohmann::json j = nlohmann::json::parse(TinyConfig().ToJson());
  edit(j);
  auto c = ModelConfig::FromJson(j.dump());
  ASSERT_FALSE(c.ok()) << "accepted: " << needle;
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find(needle), std::string::npos) << c.status().message();
}

TEST(ConfigTest, RulesAreEnforcedWithNamedKeys) {
  ExpectRefused([](auto& j) { j["text_config"].erase("hidden_size"); }, "text_config.hidden_size: missing");
  ExpectRefused([](auto& j) { j["text_config"]["hidden_size"] = "wide"; }, "text_config.hidden_size");
  ExpectRefused([](auto& j) { j["text_config"]["hidden_size"] = 250; }, "hidden_size");
  ExpectRefused([](auto& j) { j["text_config"]["kv_source_layer_ids"] = {0, 3, 4}; }, "compress ratio is 0");
  ExpectRefused([](auto& j) { j["text_config"]["kv_source_layer_ids"] = {1, 3}; }, "layer 4");
  ExpectRefused([](auto& j) { j["text_config"]["index_source_layer_ids"] = {1, 4, 6}; }, "index_source_layer_ids");
  ExpectRefused([](auto& j) { j["text_config"]["compress_ratios"] = {0, 2, 2}; }, "compress_ratios");
  ExpectRefused([](auto& j) { j["text_config"]["o_groups"] = 3; }, "o_groups");
  ExpectRefused([](auto& j) { j["text_config"]["num_experts_per_tok"] = 9; }, "num_experts_per_tok");
  ExpectRefused([](auto& j) { j["text_config"]["candidate_source_layer_id"] = 5; }, "candidate_source_layer_id");
  ExpectRefused([](auto& j) { j["text_config"]["engram_num_embeddings"] = {6126}; }, "engram_num_embeddings");
  ExpectRefused([](auto& j) { j["text_config"]["engram_layer_ids"] = {1, 9}; }, "engram_layer_ids");
  ExpectRefused([](auto& j) { j["quantization_config"]["weight_block_size"] = {128, 128}; }, "weight_block_size");
  ExpectRefused([](auto& j) { j.erase("text_config"); }, "text_config: missing");
  ExpectRefused([](auto& j) { j["text_config"]["num_key_value_heads"] = 8; }, "num_key_value_heads");
  auto bad = ModelConfig::FromJson("{not json");
  EXPECT_FALSE(bad.ok());
}

TEST(ConfigTest, AnyRuleAbidingShapeIsAccepted) {
  nlohmann::json j = nlohmann::json::parse(TinyConfig().ToJson());
  auto& t = j["text_config"];
  t["num_hidden_layers"] = 6;
  t["compress_ratios"] = {2, 2, 2, 1, 1, 0};
  t["kv_source_layer_ids"] = {0, 3};
  t["index_source_layer_ids"] = {0, 2, 3, 4};
  t["candidate_source_layer_id"] = 3;
  t["engram_layer_ids"] = {0, 5};
  t["num_attention_heads"] = 8;
  t["o_groups"] = 4;
  auto c = ModelConfig::FromJson(j.dump());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->roles[2].mode, AttnMode::kReindex);
  EXPECT_EQ(c->ced_split, 3);
  EXPECT_TRUE(c->ced_capable);
  t["kv_source_layer_ids"] = {0, 4};
  t["compress_ratios"] = {2, 2, 2, 2, 1, 1};
  t["index_source_layer_ids"] = {0, 2, 4};
  t["candidate_source_layer_id"] = -1;
  auto d = ModelConfig::FromJson(j.dump());
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_FALSE(d->ced_capable);  // layer 3 (first decoder layer) does not own its KV
}

}  // namespace
}  // namespace ds41
