// Speculative decoding on the tiny-dspark checkpoint: a verification pass equals one-row decode
// steps bit for bit, its rollback restores exactly the state a straight run has, and greedy
// speculative decoding emits the plain decode's tokens, with its logits, through rejections (random
// weights reject nearly every draft) and forced acceptances. The scheduler's arithmetic too.
#include "engine/speculation.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "engine/config/presets.h"
#include "engine/loading/model.h"
#include "tests/support/model_suite.h"
#include "tests/support/test_checkpoint.h"

namespace ds41 {
namespace {

class SpeculationTest : public testing::ModelSuite<SpeculationTest> {
 public:
  static std::string Checkpoint() { return testing::WriteTestCheckpoint(TinyDsparkConfig(), 1, "tiny-dspark-spec"); }
};

// A flat curve: verifying costs nothing extra, so the scheduler always takes every draft.
VerifyCostCurve Flat(int max_k) {
  return VerifyCostCurve{{1}, {std::vector<double>(static_cast<size_t>(max_k) + 1, 1.0)}, {0.0}};
}

TEST_F(SpeculationTest, VerifyEqualsOneRowStepsAndRollsBackExactly) {
  Engine e(*model_);
  const int V = cfg().vocab_size;
  // Prompts ending on both parities of the ratio-2 compressors, before and after the ring wraps
  // (window 16), and a verification that wraps over the slots it overwrote.
  for (int n : {5, 6, 19, 30}) {
    SequenceState st = SequenceState::Create(cfg());
    std::vector<float> lg;
    ASSERT_TRUE(e.Prefill(&st, {Prompt(n, n), {}, {}}, false, &lg).ok());
    const std::vector<int32_t> rows = {11, 12, 13, 14, 15, 16};
    // The straight run: one row per step, the state kept after each.
    std::vector<std::string> straight{st.Serialize(cfg())};
    std::vector<float> step_logits;
    SequenceState one = st;
    for (int32_t t : rows) {
      std::vector<float> l;
      ASSERT_TRUE(e.DecodeBatch({&one}, {t}, &l).ok());
      step_logits.insert(step_logits.end(), l.begin(), l.end());
      straight.push_back(one.Serialize(cfg()));
    }
    for (int keep = 0; keep <= static_cast<int>(rows.size()); ++keep) {
      SequenceState v = st;
      std::vector<float> logits, hidden;
      std::vector<StateUndo> undo;
      ASSERT_TRUE(e.VerifyBatch({&v}, {rows}, &logits, &hidden, &undo).ok());
      ASSERT_EQ(logits.size(), rows.size() * V);
      EXPECT_EQ(logits, step_logits) << "n=" << n;
      ASSERT_TRUE(RollBack(cfg(), undo[0], st.length + keep, &v).ok());
      EXPECT_EQ(v.Serialize(cfg()), straight[static_cast<size_t>(keep)]) << "n=" << n << " keep=" << keep;
      // ... and goes on as the straight run does.
      if (keep < static_cast<int>(rows.size())) {  // the state is no longer where the pass left it
        EXPECT_EQ(RollBack(cfg(), undo[0], st.length + keep, &v).code(), StatusCode::kInvalidArgument);
      }
      std::vector<float> a, b;
      ASSERT_TRUE(e.DecodeBatch({&v}, {99}, &a).ok());
      auto ref = SequenceState::Deserialize(straight[static_cast<size_t>(keep)], cfg());
      ASSERT_TRUE(ref.ok());
      ASSERT_TRUE(e.DecodeBatch({&*ref}, {99}, &b).ok());
      EXPECT_EQ(a, b);
    }
  }
}

TEST_F(SpeculationTest, GreedySpeculationEmitsThePlainDecodeBitForBit) {
  Engine e(*model_);
  const int V = cfg().vocab_size, kTokens = 40;
  const std::vector<std::vector<int32_t>> prompts = {Prompt(9, 1), Prompt(23, 2), Prompt(4, 3)};
  // Plain greedy decode, one sequence at a time: tokens and the logits each was taken from.
  std::vector<std::vector<int32_t>> plain(prompts.size());
  std::vector<std::vector<float>> plain_logits(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    SequenceState st = SequenceState::Create(cfg());
    std::vector<float> lg;
    ASSERT_TRUE(e.Prefill(&st, {prompts[i], {}, {}}, false, &lg).ok());
    for (int t = 0; t < kTokens; ++t) {
      plain[i].push_back(Argmax(lg.data(), V));
      ASSERT_TRUE(e.DecodeBatch({&st}, {plain[i].back()}, &lg).ok());
      plain_logits[i].insert(plain_logits[i].end(), lg.begin(), lg.end());
    }
  }
  // Speculative, batched, under the scheduler (a flat curve: always verify every draft) and with
  // forced k; random weights reject most drafts. Then with drafts forced right: a picker that
  // proposes the plain run's tokens, so whole blocks are accepted and the bonus row is used.
  // A draft too dear to pay even if every drafted token were accepted: the scheduler skips drafting
  // but for its probes, and the output is the same.
  struct Mode {
    int force_k;
    bool oracle;
    bool dear_draft = false;
  };
  for (const Mode mode : {Mode{-1, false}, Mode{1, false}, Mode{3, false}, Mode{5, true}, Mode{2, true},
                          Mode{-1, false, true}}) {
    std::vector<SequenceState> states(prompts.size(), SequenceState::Create(cfg()));
    std::vector<DsparkState> ds(prompts.size(), DsparkState::Create(cfg()));
    std::vector<Rng> rngs(prompts.size(), Rng(0));
    std::vector<SpecSequence> seqs(prompts.size());
    std::vector<std::vector<int32_t>> got(prompts.size());
    for (size_t i = 0; i < prompts.size(); ++i) {
      std::vector<float> lg, hidden;
      ASSERT_TRUE(e.Prefill(&states[i], {prompts[i], {}, {}}, false, &lg, &hidden).ok());
      ASSERT_TRUE(e.DsparkAppend(&ds[i], 0, hidden).ok());
      got[i].push_back(Argmax(lg.data(), V));
      seqs[i] = SpecSequence{&states[i], &ds[i], got[i].back(), {}, &rngs[i], kTokens, {}};
    }
    VerifyCostCurve curve = Flat(cfg().dspark_block_size);
    if (mode.dear_draft) curve.draft = {100.0};
    Speculator spec(&e, *model_, curve);
    int accepted = 0, rejected = 0, steps = 0, drafted = 0;
    while (true) {
      std::vector<SpecSequence> live;
      std::vector<size_t> idx;
      for (size_t i = 0; i < seqs.size(); ++i) {
        const int left = kTokens + 1 - static_cast<int>(got[i].size());
        if (left <= 0) continue;
        seqs[i].max_new = left;
        live.push_back(seqs[i]);
        idx.push_back(i);
      }
      if (live.empty()) break;
      std::vector<SpecOutcome> out;
      int k = -1;
      ASSERT_TRUE(spec.Step(&live, &out, &k, mode.force_k).ok());
      ++steps;
      drafted += spec.last_step_drafted();
      if (!spec.last_step_drafted()) {
        EXPECT_EQ(k, 0);
      }
      for (size_t j = 0; j < live.size(); ++j) {
        const size_t i = idx[j];
        seqs[i] = live[j];
        accepted += out[j].accepted;
        rejected += out[j].verified - out[j].accepted;
        got[i].insert(got[i].end(), out[j].tokens.begin(), out[j].tokens.end());
        EXPECT_EQ(states[i].length, static_cast<int64_t>(prompts[i].size() + got[i].size()) - 1);
        EXPECT_EQ(ds[i].end(), states[i].length);
      }
      if (mode.oracle) break;  // the oracle rounds below
    }
    if (mode.oracle) {
      // Oracle rounds: verify the plain run's own next tokens as the drafts, k at a time.
      for (size_t i = 0; i < seqs.size(); ++i) {
        while (static_cast<int>(got[i].size()) <= kTokens) {
          const int64_t L = states[i].length;
          const size_t have = got[i].size();
          const int k = std::min<int>(mode.force_k, kTokens + 1 - static_cast<int>(have) - 1);
          std::vector<int32_t> rows = {got[i].back()};
          for (int j = 0; j < k; ++j) rows.push_back(plain[i][have + j]);
          std::vector<float> lg, hidden;
          std::vector<StateUndo> undo;
          ASSERT_TRUE(e.VerifyBatch({&states[i]}, {rows}, &lg, &hidden, &undo).ok());
          for (int j = 0; j <= k; ++j) {
            const size_t pos = have + static_cast<size_t>(j);  // the plain step that fed rows[j]
            EXPECT_EQ(0, std::memcmp(&lg[static_cast<size_t>(j) * V], &plain_logits[i][(pos - 1) * V], V * sizeof(float)));
            if (j < k) {
              EXPECT_EQ(Argmax(&lg[static_cast<size_t>(j) * V], V), rows[j + 1]);
            }
          }
          got[i].insert(got[i].end(), rows.begin() + 1, rows.end());
          got[i].push_back(Argmax(&lg[static_cast<size_t>(k) * V], V));
          accepted += k;
          ASSERT_TRUE(RollBack(cfg(), undo[0], L + k + 1, &states[i]).ok());
        }
      }
    }
    for (size_t i = 0; i < prompts.size(); ++i) {
      got[i].resize(kTokens);
      EXPECT_EQ(got[i], plain[i]) << "force_k=" << mode.force_k << " sequence " << i;
    }
    if (mode.dear_draft) {
      EXPECT_EQ(drafted, steps / (Speculator::kProbeInterval + 1));
      EXPECT_GT(steps, Speculator::kProbeInterval);
    } else if (mode.oracle) {
      EXPECT_GT(accepted, 0);
    } else {
      EXPECT_GT(rejected, 0);
      if (mode.force_k >= 0) {
        EXPECT_EQ(drafted, steps);
      }
    }
  }
}

TEST_F(SpeculationTest, StopIdsAndBudgetCutTheStepAndTheState) {
  Engine e(*model_);
  const int V = cfg().vocab_size;
  SequenceState st = SequenceState::Create(cfg());
  DsparkState ds = DsparkState::Create(cfg());
  std::vector<float> lg, hidden;
  ASSERT_TRUE(e.Prefill(&st, {Prompt(12, 4), {}, {}}, false, &lg, &hidden).ok());
  ASSERT_TRUE(e.DsparkAppend(&ds, 0, hidden).ok());
  Rng rng(0);
  const int32_t first = Argmax(lg.data(), V);
  const int64_t L = st.length;
  // The first emitted token is a stop id: one token, one row kept.
  SequenceState s1 = st;
  DsparkState d1 = ds;
  SequenceState probe = st;
  std::vector<float> pl;
  ASSERT_TRUE(e.DecodeBatch({&probe}, {first}, &pl).ok());
  std::vector<SpecSequence> seqs = {{&s1, &d1, first, {}, &rng, 10, {Argmax(pl.data(), V)}}};
  std::vector<SpecOutcome> out;
  int k = 0;
  ASSERT_TRUE(Speculator(&e, *model_, Flat(5)).Step(&seqs, &out, &k, 5).ok());
  EXPECT_EQ(out[0].tokens.size(), 1u);
  EXPECT_EQ(s1.length, L + 1);
  EXPECT_EQ(d1.end(), L + 1);
  // A budget of one token verifies nothing.
  SequenceState s2 = st;
  DsparkState d2 = ds;
  seqs = {{&s2, &d2, first, {}, &rng, 1, {}}};
  ASSERT_TRUE(Speculator(&e, *model_, Flat(5)).Step(&seqs, &out, &k, 5).ok());
  EXPECT_EQ(out[0].verified, 0);
  EXPECT_EQ(out[0].tokens.size(), 1u);
  EXPECT_EQ(s2.length, L + 1);
}

// Sampled speculation (temperature > 0): every step keeps the state, the DSpark state and the emitted
// tokens in step, and a seed repeats its run. (The acceptance rule's distribution: sampling_test.)
TEST_F(SpeculationTest, SampledSpeculationIsConsistentAndSeeded) {
  Engine e(*model_);
  const int V = cfg().vocab_size;
  auto run = [&](uint64_t seed) {
    SequenceState st = SequenceState::Create(cfg());
    DsparkState ds = DsparkState::Create(cfg());
    std::vector<float> lg, hidden;
    EXPECT_TRUE(e.Prefill(&st, {Prompt(14, 6), {}, {}}, false, &lg, &hidden).ok());
    EXPECT_TRUE(e.DsparkAppend(&ds, 0, hidden).ok());
    const SamplingParams sp{0.9f, 0.95f, seed};
    Rng rng(seed);
    std::vector<int32_t> got = {SampleToken(lg.data(), V, sp, &rng)};
    Speculator spec(&e, *model_, Flat(cfg().dspark_block_size));
    while (got.size() < 30) {
      std::vector<SpecSequence> seqs = {{&st, &ds, got.back(), sp, &rng, 30 - static_cast<int>(got.size()), {}}};
      std::vector<SpecOutcome> out;
      int k = 0;
      EXPECT_TRUE(spec.Step(&seqs, &out, &k).ok());
      EXPECT_GE(out[0].tokens.size(), 1u);
      EXPECT_LE(out[0].tokens.size(), static_cast<size_t>(out[0].verified) + 1);
      got.insert(got.end(), out[0].tokens.begin(), out[0].tokens.end());
      EXPECT_EQ(st.length, 14 + static_cast<int64_t>(got.size()) - 1);
      EXPECT_EQ(ds.end(), st.length);
    }
    EXPECT_EQ(got.size(), 30u);
    return got;
  };
  EXPECT_EQ(run(5), run(5));
  EXPECT_NE(run(5), run(6));
}

TEST_F(SpeculationTest, CostCurveShapeAndErrors) {
  Engine e(*model_);
  auto curve = MeasureVerifyCost(e, *model_, {1, 3}, 2, /*prompt=*/4, /*repeats=*/1);
  ASSERT_TRUE(curve.ok()) << curve.status().ToString();
  ASSERT_EQ(curve->verify.size(), 2u);
  for (const auto& v : curve->verify) {
    ASSERT_EQ(v.size(), 3u);
    EXPECT_EQ(v[0], 1.0);
    EXPECT_LE(v[1], v[2]);
  }
  EXPECT_EQ(curve->max_k(), 2);
  EXPECT_GT(curve->Draft(2), 0.0);
  EXPECT_EQ(MeasureVerifyCost(e, *model_, {1}, cfg().dspark_block_size + 1, 4, 1).status().code(),
            StatusCode::kInvalidArgument);
  // Verification's own checks: 1 to window rows, each state once.
  SequenceState st = SequenceState::Create(cfg());
  std::vector<float> lg, hidden;
  std::vector<StateUndo> undo;
  ASSERT_TRUE(e.Prefill(&st, {Prompt(3, 1), {}, {}}, false, &lg).ok());
  EXPECT_EQ(e.VerifyBatch({&st}, {{}}, &lg, nullptr, &undo).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(e.VerifyBatch({&st}, {std::vector<int32_t>(cfg().window_size + 1, 5)}, &lg, nullptr, &undo).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(e.VerifyBatch({&st, &st}, {{5}, {6}}, &lg, nullptr, &undo).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.length, 3);
  // A model without DSpark: no curve.
  auto tiny = Model::Open(testing::TinyCheckpoint());
  ASSERT_TRUE(tiny.ok());
  Engine t(**tiny);
  EXPECT_EQ(MeasureVerifyCost(t, **tiny, {1}, 1, 4, 1).status().code(), StatusCode::kFailedPrecondition);
}

TEST(SpeculationScheduler, PaperExampleChoosesThreeAndLoadMovesK) {
  // Paper notes C8: p = (0.9, 0.8, 0.6, 0.3, 0.2), cost(k) = 1 + 0.1 k -> k* = 3.
  const std::vector<double> a = {0.9, 0.8, 0.6, 0.3, 0.2};
  EXPECT_NEAR(ExpectedTokens(a, 3), 1 + 0.9 + 0.72 + 0.432, 1e-12);
  VerifyCostCurve toy{{1}, {{1.0, 1.1, 1.2, 1.3, 1.4, 1.5}}, {0.1}};
  EXPECT_EQ(ChooseVerifyLength({a}, toy), 3);
  // A steep curve at a large batch (verification as dear as decoding k + 1 times): plain decode.
  VerifyCostCurve load{{1, 32}, {{1.0, 1.1, 1.2, 1.3, 1.4, 1.5}, {1.0, 2.0, 3.0, 4.0, 5.0, 6.0}}, {0.1, 0.1}};
  EXPECT_EQ(ChooseVerifyLength({a}, load), 3);
  EXPECT_EQ(ChooseVerifyLength(std::vector<std::vector<double>>(32, a), load), 0);
  EXPECT_NEAR(load.Verify(2, 16), 1.2 + (15.0 / 31.0) * 1.8, 1e-12);
  EXPECT_NEAR(AcceptanceEstimate(0.0f), 0.5, 1e-12);
}

TEST(SpeculationScheduler, DraftingIsSkippedWhereNoAcceptanceCouldPayForIt) {
  // At batch 1 verification is cheap: even 0.3 acceptance pays (1.3 > 1.1 + 0.1).
  VerifyCostCurve c{{1, 32}, {{1.0, 1.1, 1.2, 1.3, 1.4, 1.5}, {1.0, 2.0, 3.0, 4.0, 5.0, 6.0}}, {0.1, 0.4}};
  EXPECT_TRUE(DraftCanPay({0.3, 0.3}, c, 1));
  EXPECT_FALSE(DraftCanPay({0.15, 0.1}, c, 1));  // 1.15 < 1.2
  // At batch 32 verifying k costs k + 1 steps plus the draft: nothing pays, perfect acceptance neither.
  EXPECT_FALSE(DraftCanPay({1.0, 1.0, 1.0, 1.0, 1.0}, c, 32));
  EXPECT_FALSE(DraftCanPay({}, c, 1));
}

}  // namespace
}  // namespace ds41
