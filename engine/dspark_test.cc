// DSpark (MODEL.md §9.3) in the engine on the tiny-dspark checkpoint: the tensor table and loading,
// the target-row capture leaving the backbone untouched, batched drafts equal to single ones, ring
// rollback, the CED path's capture and the errors. Agreement with the oracle: tests/oracle (ctest -R
// oracle_dspark).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <random>

#include "engine/config/presets.h"
#include "engine/engine.h"
#include "engine/loading/model.h"
#include "engine/loading/tensor_table.h"
#include "tests/support/model_suite.h"
#include "tests/support/test_checkpoint.h"

namespace ds41 {
namespace {

class DsparkTest : public testing::ModelSuite<DsparkTest> {
 public:
  static std::string Checkpoint() { return testing::WriteTestCheckpoint(TinyDsparkConfig(), 1, "tiny-dspark"); }

 protected:
  // Prefill of `n` tokens with the DSpark capture, appended to a fresh DSpark state.
  void Start(Engine& e, int n, int seed, SequenceState* st, DsparkState* ds, int32_t* next) const {
    std::vector<float> logits, hidden;
    ASSERT_TRUE(e.Prefill(st, {Prompt(n, seed), {}, {}}, false, &logits, &hidden).ok());
    ASSERT_TRUE(e.DsparkAppend(ds, 0, hidden).ok());
    *next = GreedyDraftPick(logits.data(), cfg().vocab_size);
  }
};

bool SameDraft(const Draft& a, const Draft& b) {
  return a.start == b.start && a.tokens == b.tokens && a.confidence == b.confidence &&
         a.logits.size() == b.logits.size() &&
         std::memcmp(a.logits.data(), b.logits.data(), a.logits.size() * sizeof(float)) == 0;
}

TEST_F(DsparkTest, TableListsAndLoaderBindsEveryMtpTensor) {
  int mtp = 0, conf = 0;
  ForEachTensor(cfg(), [&](const TensorSpec& s) {
    if (s.name.rfind("mtp.", 0) == 0) ++mtp;
    if (s.name == "mtp.2.confidence_head.proj.weight") conf = static_cast<int>(s.shape[1]);
  });
  EXPECT_GT(mtp, 0);
  EXPECT_EQ(conf, cfg().dim + cfg().dspark_markov_rank);
  const DsparkWeights& d = model_->weights().dspark;
  ASSERT_EQ(d.layers.size(), 3u);
  EXPECT_EQ(d.layers[0].experts.size(), 4u);
  EXPECT_EQ(d.main_proj.in, 3 * cfg().dim);
  EXPECT_TRUE(d.markov_embed.present() && d.markov_head.present() && d.confidence_proj.present() && d.norm.present());
  // Without DSpark layers the table has no mtp.* names (and mtp.* in a checkpoint would be ignored).
  int tiny_mtp = 0;
  ForEachTensor(TinyConfig(), [&](const TensorSpec& s) { tiny_mtp += s.name.rfind("mtp.", 0) == 0; });
  EXPECT_EQ(tiny_mtp, 0);
  EXPECT_TRUE(IsIgnoredTensorName(TinyConfig(), "mtp.0.main_norm.weight"));
  EXPECT_FALSE(IsIgnoredTensorName(cfg(), "mtp.0.main_norm.weight"));
}

// The release's inventory (MODEL.md §2.6: 96,085 tensors, 510,286,023,000 bytes, split by dtype) is
// what the table lists at release dims, so the mtp.* and vision tensors (names, formats, shapes) are
// the release's.
TEST(DsparkTable, ReleaseInventoryMatchesThePublishedOne) {
  int64_t count = 0;
  std::map<DType, int64_t> bytes;
  ForEachTensor(ReleaseConfig(), [&](const TensorSpec& s) {
    for (const StoredTensor& t : StoredTensors(s)) {
      int64_t n = DTypeSize(t.dtype);
      for (int64_t d : t.shape) n *= d;
      bytes[t.dtype] += n;
      ++count;
    }
  });
  EXPECT_EQ(count, 96085);
  EXPECT_EQ(bytes[DType::kI8], 278585671680);
  EXPECT_EQ(bytes[DType::kF8E4M3], 204015223296);
  EXPECT_EQ(bytes[DType::kF8E8M0], 23563015184);
  EXPECT_EQ(bytes[DType::kF32], 169229128);
  EXPECT_EQ(bytes[DType::kBF16], 3952883712);
}

TEST_F(DsparkTest, ConfigRoundTripsAndRejectsBadDsparkKeys) {
  auto back = ModelConfig::FromJson(cfg().ToJson());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->ToJson(), cfg().ToJson());
  EXPECT_EQ(back->dspark_target_layer_ids, (std::vector<int>{5, 6, 7}));
  ModelConfig c = TinyDsparkConfig();
  c.dspark_block_size = 0;
  EXPECT_FALSE(c.Validate().ok());
  c = TinyDsparkConfig();
  c.dspark_target_layer_ids = {6, 8};
  EXPECT_FALSE(c.Validate().ok());
  c = TinyDsparkConfig();
  c.compress_ratios[9] = 1;
  EXPECT_FALSE(c.Validate().ok());
  c = TinyDsparkConfig();
  c.dspark_n_activated_experts = 5;
  EXPECT_FALSE(c.Validate().ok());
  // A config without DSpark writes no dspark keys (its JSON and fingerprint stay as they were).
  EXPECT_EQ(TinyConfig().ToJson().find("dspark"), std::string::npos);
}

TEST_F(DsparkTest, CaptureLeavesTheBackboneBitIdentical) {
  Engine e(*model_);
  const auto prompt = Prompt(20, 3);
  SequenceState a = SequenceState::Create(cfg()), b = SequenceState::Create(cfg());
  std::vector<float> la, lb, hidden;
  ASSERT_TRUE(e.Prefill(&a, {prompt, {}, {}}, true, &la).ok());
  ASSERT_TRUE(e.Prefill(&b, {prompt, {}, {}}, true, &lb, &hidden).ok());
  EXPECT_EQ(la, lb);
  EXPECT_EQ(hidden.size(), prompt.size() * 3 * cfg().dim);
  ASSERT_TRUE(e.DecodeBatch({&a}, {7}, &la).ok());
  ASSERT_TRUE(e.DecodeBatch({&b}, {7}, &lb, &hidden).ok());
  EXPECT_EQ(la, lb);
  EXPECT_EQ(hidden.size(), 3u * cfg().dim);
}

TEST_F(DsparkTest, BatchedDraftsEqualSingleDraftsAndDecodeFollows) {
  Engine e(*model_);
  SequenceState s1 = SequenceState::Create(cfg()), s2 = SequenceState::Create(cfg());
  DsparkState d1 = DsparkState::Create(cfg()), d2 = DsparkState::Create(cfg());
  int32_t n1 = 0, n2 = 0;
  Start(e, 9, 1, &s1, &d1, &n1);
  Start(e, 30, 2, &s2, &d2, &n2);  // past the window: the ring has wrapped
  for (int step = 0; step < 3; ++step) {
    std::vector<Draft> both, one1, one2;
    ASSERT_TRUE(e.DsparkDraft({{&d1, n1}, {&d2, n2}}, nullptr, &both).ok());
    ASSERT_TRUE(e.DsparkDraft({{&d1, n1}}, nullptr, &one1).ok());
    ASSERT_TRUE(e.DsparkDraft({{&d2, n2}}, nullptr, &one2).ok());
    ASSERT_EQ(both.size(), 2u);
    EXPECT_TRUE(SameDraft(both[0], one1[0]));
    EXPECT_TRUE(SameDraft(both[1], one2[0]));
    EXPECT_EQ(both[0].start, s1.length);
    EXPECT_EQ(static_cast<int>(both[0].tokens.size()), cfg().dspark_block_size);
    // The next target step (batched), its rows appended.
    std::vector<float> logits, hidden;
    const int64_t p1 = s1.length, p2 = s2.length;
    ASSERT_TRUE(e.DecodeBatch({&s1, &s2}, {n1, n2}, &logits, &hidden).ok());
    const size_t w = 3 * static_cast<size_t>(cfg().dim);
    ASSERT_TRUE(e.DsparkAppend(&d1, p1, std::vector<float>(hidden.begin(), hidden.begin() + w)).ok());
    ASSERT_TRUE(e.DsparkAppend(&d2, p2, std::vector<float>(hidden.begin() + w, hidden.end())).ok());
    n1 = GreedyDraftPick(logits.data(), cfg().vocab_size);
    n2 = GreedyDraftPick(logits.data() + cfg().vocab_size, cfg().vocab_size);
  }
}

TEST_F(DsparkTest, RollbackOfOnePositionEqualsAStraightRun) {
  Engine e(*model_);
  const int W = cfg().window_size;
  for (int n : {10, 30}) {
    SequenceState st = SequenceState::Create(cfg());
    DsparkState straight = DsparkState::Create(cfg()), rolled = DsparkState::Create(cfg()),
                rolled2 = DsparkState::Create(cfg());
    std::vector<float> logits, hidden;
    const auto prompt = Prompt(n + 1, 5);
    ASSERT_TRUE(e.Prefill(&st, {prompt, {}, {}}, false, &logits, &hidden).ok());
    const size_t w = 3 * static_cast<size_t>(cfg().dim);
    std::vector<float> head(hidden.begin(), hidden.end() - w), last(hidden.end() - w, hidden.end());
    std::vector<float> wrong(2 * w);
    for (size_t i = 0; i < wrong.size(); ++i) wrong[i] = head[i % head.size()];
    ASSERT_TRUE(e.DsparkAppend(&straight, 0, hidden).ok());
    // One rejected position: its slot held position n - W, which the window at n + 1 no longer holds.
    ASSERT_TRUE(e.DsparkAppend(&rolled, 0, head).ok());
    ASSERT_TRUE(e.DsparkAppend(&rolled, n, std::vector<float>(wrong.begin(), wrong.begin() + w)).ok());
    ASSERT_TRUE(e.DsparkAppend(&rolled, n, last).ok());
    EXPECT_EQ(rolled.end(), n + 1);
    std::vector<Draft> a, b;
    ASSERT_TRUE(e.DsparkDraft({{&straight, 11}}, nullptr, &a).ok());
    ASSERT_TRUE(e.DsparkDraft({{&rolled, 11}}, nullptr, &b).ok());
    EXPECT_TRUE(SameDraft(a[0], b[0])) << "n=" << n;
    // Two rejected positions overwrote position n + 1 - W's slot too: it is absent afterwards.
    ASSERT_TRUE(e.DsparkAppend(&rolled2, 0, head).ok());
    ASSERT_TRUE(e.DsparkAppend(&rolled2, n, wrong).ok());
    ASSERT_TRUE(e.DsparkAppend(&rolled2, n, last).ok());
    const int64_t want_first = n + 1 >= W ? n + 2 - W : 0;
    EXPECT_EQ(rolled2.rings[0].first_valid(W), want_first) << "n=" << n;
    EXPECT_EQ(straight.rings[0].first_valid(W), std::max(0, n + 1 - W));
  }
}

TEST_F(DsparkTest, CedReplayCapturesTheSameRowsAsTheExactPath) {
  Engine e(*model_);
  const auto prompt = Prompt(cfg().window_size, 8);  // N <= window: CED == exact
  SequenceState a = SequenceState::Create(cfg()), b = SequenceState::Create(cfg());
  std::vector<float> la, lb, ha, hb;
  ASSERT_TRUE(e.Prefill(&a, {prompt, {}, {}}, false, &la, &ha).ok());
  auto h = e.EncodePrefill(&b, {prompt, {}, {}});
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  ASSERT_TRUE(e.DecoderReplay(&b, {prompt, {}, {}}, *h, 0, &lb, false, &hb).ok());
  EXPECT_EQ(la, lb);
  EXPECT_EQ(ha, hb);
}

TEST_F(DsparkTest, Errors) {
  Engine e(*model_);
  DsparkState empty = DsparkState::Create(cfg());
  std::vector<Draft> d;
  EXPECT_EQ(e.DsparkDraft({{&empty, 5}}, nullptr, &d).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(e.DsparkAppend(&empty, 0, std::vector<float>(7)).code(), StatusCode::kInvalidArgument);
  SequenceState st = SequenceState::Create(cfg());
  DsparkState ds = DsparkState::Create(cfg());
  int32_t next = 0;
  Start(e, 4, 9, &st, &ds, &next);
  EXPECT_EQ(e.DsparkDraft({{&ds, cfg().vocab_size}}, nullptr, &d).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(e.DsparkDraft({{&ds, 1}, {&ds, 2}}, nullptr, &d).code(), StatusCode::kInvalidArgument);
  // A custom picker sees each slot's biased logits and its pick feeds the next slot.
  std::vector<int> slots;
  ASSERT_TRUE(e.DsparkDraft({{&ds, next}}, [&](size_t, int slot, const float*) {
                 slots.push_back(slot);
                 return 3;
               }, &d).ok());
  EXPECT_EQ(slots, (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_EQ(d[0].tokens, (std::vector<int32_t>(5, 3)));

  // The tiny model has no DSpark layers.
  auto tiny = Model::Open(testing::TinyCheckpoint());
  ASSERT_TRUE(tiny.ok());
  Engine t(**tiny);
  SequenceState ts = SequenceState::Create((*tiny)->config());
  std::vector<float> logits, hidden;
  EXPECT_EQ(t.Prefill(&ts, {{5, 6}, {}, {}}, false, &logits, &hidden).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(ts.length, 0);
  EXPECT_EQ(t.DsparkDraft({{&ds, 5}}, nullptr, &d).code(), StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace ds41
