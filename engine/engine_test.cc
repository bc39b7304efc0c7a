// Behaviour of the engine's entry points on the tiny checkpoint: chunked prefill, batched decode,
// the CED path against the exact path, encoder replay and state serialization.
#include "engine/engine.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>

#include "engine/kernels/numerics.h"
#include "engine/loading/model.h"
#include "engine/sampling.h"
#include "tests/support/model_suite.h"
#include "tests/support/test_checkpoint.h"

namespace ds41 {
namespace {

class EngineTest : public testing::ModelSuite<EngineTest> {
 public:
  static std::string Checkpoint() { return testing::TinyCheckpoint(); }

 protected:
  SequenceState NewState() const { return SequenceState::Create(cfg()); }

  // Greedy continuation of `st` for `steps` tokens starting from `logits` (one row).
  std::vector<int32_t> Greedy(Engine& e, SequenceState* st, std::vector<float> logits, int steps,
                              std::vector<float>* all = nullptr) const {
    std::vector<int32_t> out;
    const int V = cfg().vocab_size;
    for (int k = 0; k < steps; ++k) {
      const int32_t t = Argmax(&logits[logits.size() - V], V);
      out.push_back(t);
      EXPECT_TRUE(e.DecodeBatch({st}, {t}, &logits).ok());
      if (all) all->insert(all->end(), logits.begin(), logits.end());
    }
    return out;
  }
};

double RelL2(const float* a, const float* b, size_t n) {
  double d = 0, r = 0;
  for (size_t i = 0; i < n; ++i) {
    d += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    r += double(b[i]) * b[i];
  }
  return std::sqrt(d / r);
}

TEST_F(EngineTest, ChunkedPrefillEqualsWholePrefillBitForBit) {
  Engine e(*model_);
  const auto prompt = Prompt(71, 1);
  SequenceState whole = NewState();
  std::vector<float> whole_logits;
  ASSERT_TRUE(e.Prefill(&whole, {prompt, {}, {}}, true, &whole_logits).ok());
  const int V = cfg().vocab_size;
  // Boundaries inside ratio-2 pairs (odd), at the window, single tokens, and a long tail.
  for (const std::vector<int>& cuts : std::vector<std::vector<int>>{{1, 2, 3}, {5, 16, 17, 33}, {35}, {7, 8, 9, 10, 64}}) {
    SequenceState st = NewState();
    std::vector<float> got;
    int begin = 0;
    std::vector<int> ends = cuts;
    ends.push_back(static_cast<int>(prompt.size()));
    for (int end : ends) {
      std::vector<float> lg;
      ASSERT_TRUE(e.Prefill(&st, {std::vector<int32_t>(prompt.begin() + begin, prompt.begin() + end), {}, {}}, true, &lg).ok());
      got.insert(got.end(), lg.begin(), lg.end());
      begin = end;
    }
    ASSERT_EQ(got.size(), whole_logits.size());
    EXPECT_EQ(got, whole_logits) << "chunk boundaries changed the logits";
    EXPECT_EQ(st.Serialize(cfg()), whole.Serialize(cfg())) << "chunk boundaries changed the state";
    std::vector<float> a(whole_logits.end() - V, whole_logits.end()), b(got.end() - V, got.end());
    SequenceState w2 = whole;
    EXPECT_EQ(Greedy(e, &w2, a, 5), Greedy(e, &st, b, 5));
  }
}

// An image span's rows (embeddings of the flagged rows only) split across chunks at any boundary:
// inside the span, at its edges, and before it.
TEST_F(EngineTest, ImageRowsSplitAcrossChunksEqualOnePrefill) {
  Engine e(*model_);
  TokenSpan span{Prompt(40, 4), std::vector<uint8_t>(40, 0), {}};
  std::mt19937 rng(9);
  std::normal_distribution<float> normal(0.0f, 0.12f);
  for (int p = 11; p < 26; ++p) {
    span.image[p] = 1;
    for (int d = 0; d < cfg().dim; ++d) span.image_embeds.push_back(RoundBf16(normal(rng)));
  }
  SequenceState whole = NewState();
  std::vector<float> whole_logits, text_logits;
  ASSERT_TRUE(e.Prefill(&whole, span, true, &whole_logits).ok());
  SequenceState text = NewState();
  ASSERT_TRUE(e.Prefill(&text, {span.tokens, {}, {}}, true, &text_logits).ok());
  EXPECT_NE(whole_logits, text_logits) << "the image rows changed nothing";
  for (const std::vector<size_t>& cuts : std::vector<std::vector<size_t>>{{5}, {11}, {12, 20}, {26}, {3, 25, 30}}) {
    SequenceState st = NewState();
    std::vector<float> got;
    size_t begin = 0;
    std::vector<size_t> ends = cuts;
    ends.push_back(span.tokens.size());
    for (size_t end : ends) {
      std::vector<float> lg;
      ASSERT_TRUE(e.Prefill(&st, span.Slice(begin, end, cfg().dim), true, &lg).ok());
      got.insert(got.end(), lg.begin(), lg.end());
      begin = end;
    }
    EXPECT_EQ(got, whole_logits) << "cut at " << cuts[0];
  }
  // Embeddings that start later (image_embeds_from) but before the image change nothing; sliced
  // at a cut inside the image, the second chunk carries only its own rows.
  TokenSpan later = span;
  later.image_embeds_from = 8;
  {
    SequenceState st = NewState();
    std::vector<float> a, b;
    TokenSpan first = later.Slice(0, 17, cfg().dim), second = later.Slice(17, 40, cfg().dim);
    EXPECT_EQ(second.image_embeds.size(), 9u * cfg().dim);
    ASSERT_TRUE(e.Prefill(&st, first, true, &a).ok());
    ASSERT_TRUE(e.Prefill(&st, second, true, &b).ok());
    a.insert(a.end(), b.begin(), b.end());
    EXPECT_EQ(a, whole_logits);
  }
  SequenceState st = NewState();
  std::vector<float> lg;
  // Embeddings for every token (the old layout) are refused: they must be the flagged rows'.
  TokenSpan wide = span;
  wide.image_embeds.assign(span.tokens.size() * cfg().dim, 0.0f);
  EXPECT_EQ(e.Prefill(&st, wide, false, &lg).code(), StatusCode::kInvalidArgument);
  // An image row that would be computed without its embedding is refused, not taken as a token.
  TokenSpan cut = span;
  cut.image_embeds_from = 15;
  cut.image_embeds.erase(cut.image_embeds.begin(), cut.image_embeds.begin() + 4 * cfg().dim);
  EXPECT_EQ(e.Prefill(&st, cut, false, &lg).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.length, 0);
}

TEST_F(EngineTest, BatchedDecodeEqualsOneByOne) {
  Engine e(*model_);
  SequenceState a = NewState(), b = NewState(), a1, b1;
  std::vector<float> la, lb;
  ASSERT_TRUE(e.Prefill(&a, {Prompt(20, 2), {}, {}}, false, &la).ok());
  ASSERT_TRUE(e.Prefill(&b, {Prompt(33, 3), {}, {}}, false, &lb).ok());
  a1 = a;
  b1 = b;
  std::vector<float> batch, sa, sb;
  for (int step = 0; step < 4; ++step) {
    ASSERT_TRUE(e.DecodeBatch({&a, &b}, {10 + step, 20 + step}, &batch).ok());
    ASSERT_TRUE(e.DecodeBatch({&a1}, {10 + step}, &sa).ok());
    ASSERT_TRUE(e.DecodeBatch({&b1}, {20 + step}, &sb).ok());
    const int V = cfg().vocab_size;
    EXPECT_EQ(std::vector<float>(batch.begin(), batch.begin() + V), sa);
    EXPECT_EQ(std::vector<float>(batch.begin() + V, batch.end()), sb);
  }
}

TEST_F(EngineTest, CedEqualsExactForPromptsWithinTheWindow) {
  Engine e(*model_);
  const int V = cfg().vocab_size;
  for (int n : {1, 2, 5, 15, cfg().window_size}) {
    const auto prompt = Prompt(n, 10 + n);
    SequenceState ex = NewState(), ced = NewState();
    std::vector<float> le, lc;
    ASSERT_TRUE(e.Prefill(&ex, {prompt, {}, {}}, true, &le).ok());
    auto h = e.EncodePrefill(&ced, {prompt, {}, {}});
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    ASSERT_TRUE(e.DecoderReplay(&ced, {prompt, {}, {}}, *h, 0, &lc, /*all_rows=*/true).ok());
    EXPECT_EQ(lc, le) << "n=" << n;
    EXPECT_EQ(ced.Serialize(cfg()), ex.Serialize(cfg())) << "n=" << n;
    std::vector<float> de, dc;
    EXPECT_EQ(Greedy(e, &ex, {le.end() - V, le.end()}, 8, &de), Greedy(e, &ced, {lc.end() - V, lc.end()}, 8, &dc));
    EXPECT_EQ(de, dc);
  }
}

TEST_F(EngineTest, CedDivergenceBeyondTheWindowIsMeasured) {
  Engine e(*model_);
  const int V = cfg().vocab_size;
  for (int n : {17, 40, 100, 300}) {
    const auto prompt = Prompt(n, 20 + n);
    SequenceState ex = NewState(), ced = NewState();
    std::vector<float> le, lc;
    ASSERT_TRUE(e.Prefill(&ex, {prompt, {}, {}}, false, &le).ok());
    ASSERT_TRUE(e.CedPrefill(&ced, {prompt, {}, {}}, -1, &lc).ok());
    // The encoder and every global KV entry are exact on the CED path: only decoder layers differ.
    for (size_t i = 0; i < ex.kv.size(); ++i) {
      EXPECT_EQ(ced.kv[i].main_kv, ex.kv[i].main_kv) << "kv source " << i << " n=" << n;
      EXPECT_EQ(ced.kv[i].index_keys, ex.kv[i].index_keys);
    }
    for (int L = 0; L <= cfg().ced_split; ++L) EXPECT_EQ(ced.rings[L].slots, ex.rings[L].slots) << "layer " << L;
    const double d = RelL2(lc.data(), le.data(), V);
    std::vector<int32_t> ge = Greedy(e, &ex, le, 16), gc = Greedy(e, &ced, lc, 16);
    int same = 0;
    while (same < 16 && ge[same] == gc[same]) ++same;
    std::printf("[ CED vs exact ] n=%d replay start %d: last-position logits rel L2 %.3e, argmax %s, "
                "greedy prefix agreement %d/16\n",
                n, n - cfg().window_size, d, Argmax(lc.data(), V) == Argmax(le.data(), V) ? "same" : "differs", same);
    EXPECT_TRUE(std::isfinite(d));
  }
}

TEST_F(EngineTest, SharedChunkedEncodeStepsEqualOneEncode) {
  Engine e(*model_);
  const auto p1 = Prompt(45, 31), p2 = Prompt(23, 32);
  SequenceState a1 = NewState(), a2 = NewState(), b1 = NewState(), b2 = NewState();
  auto h1 = e.EncodePrefill(&a1, {p1, {}, {}});
  auto h2 = e.EncodePrefill(&a2, {p2, {}, {}});
  ASSERT_TRUE(h1.ok() && h2.ok());
  EncodeJob j1, j2;
  ASSERT_TRUE(e.BeginEncode(&b1, {p1, {}, {}}, &j1).ok());
  ASSERT_TRUE(e.BeginEncode(&b2, {p2, {}, {}}, &j2).ok());
  // Two jobs share passes under a budget of 10 tokens, chunks cut inside ratio-2 groups.
  while (j1.remaining() > 0 || j2.remaining() > 0) {
    std::vector<EncodeJob*> jobs;
    std::vector<int64_t> counts;
    int64_t budget = 10;
    for (EncodeJob* j : {&j1, &j2}) {
      const int64_t take = std::min<int64_t>(budget, std::min<int64_t>(j->remaining(), 7));
      if (take > 0) {
        jobs.push_back(j);
        counts.push_back(take);
        budget -= take;
      }
    }
    ASSERT_TRUE(e.EncodeStep(jobs, counts).ok());
  }
  auto f1 = e.FinishEncode(&j1);
  auto f2 = e.FinishEncode(&j2);
  ASSERT_TRUE(f1.ok() && f2.ok());
  EXPECT_EQ(f1->x, h1->x);
  EXPECT_EQ(f1->window.entries, h1->window.entries);
  EXPECT_EQ(f1->window.start, h1->window.start);
  EXPECT_EQ(f2->x, h2->x);
  EXPECT_EQ(b1.Serialize(cfg()), a1.Serialize(cfg()));
  EXPECT_EQ(b2.Serialize(cfg()), a2.Serialize(cfg()));
}

TEST_F(EngineTest, ExpertCacheChangesNothingButResidency) {
  const auto prompt = Prompt(30, 77);
  Engine plain(*model_);
  SequenceState a = NewState();
  std::vector<float> la;
  ASSERT_TRUE(plain.Prefill(&a, {prompt, {}, {}}, true, &la).ok());
  const uint64_t one = static_cast<uint64_t>(3 * cfg().moe_inter_dim * cfg().dim / 2 + 3 * cfg().moe_inter_dim * cfg().dim / 32);
  ExpertCache cache(model_->weights(), 18 * one);  // fewer than the experts this prompt touches
  Engine cached(*model_);
  cached.set_expert_cache(&cache);
  SequenceState b = NewState();
  std::vector<float> lb;
  ASSERT_TRUE(cached.Prefill(&b, {prompt, {}, {}}, true, &lb).ok());
  EXPECT_EQ(la, lb);
  EXPECT_EQ(Greedy(plain, &a, la, 6), Greedy(cached, &b, lb, 6));
  std::printf("[ expert cache ] hits %lu misses %lu evictions %lu\n", (unsigned long)cache.hits(), (unsigned long)cache.misses(), (unsigned long)cache.evictions());
  EXPECT_GT(cache.misses(), 0u);
  EXPECT_GT(cache.hits(), 0u);
  EXPECT_GT(cache.evictions(), 0u);
  EXPECT_LE(cache.resident_bytes(), 18 * one);
}

TEST_F(EngineTest, SecondTurnReusesTheKeptStream) {
  Engine e(*model_);
  const auto turn1 = Prompt(40, 5);
  SequenceState st = NewState();
  std::vector<float> lg;
  ASSERT_TRUE(e.CedPrefill(&st, {turn1, {}, {}}, -1, &lg).ok());
  std::vector<int32_t> ctx = turn1;
  for (int32_t t : Greedy(e, &st, lg, 6)) ctx.push_back(t);  // every greedy token was fed back
  ASSERT_EQ(static_cast<int64_t>(ctx.size()), st.length);
  auto ext = Prompt(7, 6);  // a short tool result: N - h < window, so replay reaches into the old turn
  ctx.insert(ctx.end(), ext.begin(), ext.end());
  ASSERT_TRUE(e.CedPrefill(&st, {ctx, {}, {}}, -1, &lg).ok());
  // The whole context through the exact path gives the same global KV.
  SequenceState ex = NewState();
  std::vector<float> le;
  ASSERT_TRUE(e.Prefill(&ex, {ctx, {}, {}}, false, &le).ok());
  for (size_t i = 0; i < ex.kv.size(); ++i) EXPECT_EQ(st.kv[i].main_kv, ex.kv[i].main_kv);
  for (int L = 0; L < cfg().ced_split; ++L) EXPECT_EQ(st.rings[L].slots, ex.rings[L].slots) << L;
}

TEST_F(EngineTest, EncoderReplayRebuildsTheSwaState) {
  Engine e(*model_);
  const int W = cfg().window_size;
  for (int h : {9, 12, 30}) {
    const auto prompt = Prompt(h, 40 + h);
    SequenceState full = NewState();
    std::vector<float> lg;
    ASSERT_TRUE(e.Prefill(&full, {prompt, {}, {}}, false, &lg).ok());
    // What a cache hit restores: global KV of [0, h) only (complete groups), no rings, no history.
    SequenceState st = NewState();
    st.length = h;
    for (size_t i = 0; i < st.kv.size(); ++i) {
      const int m = cfg().compress_ratios[cfg().kv_source_layers[i]];
      st.kv[i].main_kv = full.kv[i].main_kv;
      st.kv[i].index_keys = full.kv[i].index_keys;
      st.kv[i].processed = h / m * m;
    }
    const int64_t start = std::max(0, h - W);
    ASSERT_TRUE(e.EncoderReplay(&st, {prompt, {}, {}}, start).ok());
    EXPECT_EQ(st.engram_history, full.engram_history);
    for (size_t i = 0; i < st.kv.size(); ++i) {
      EXPECT_EQ(st.kv[i].processed, h);
      EXPECT_EQ(st.kv[i].main_kv, full.kv[i].main_kv);
    }
    if (start == 0) {  // nothing truncated: the rebuilt SWA state is exact
      for (int L = 0; L <= cfg().ced_split; ++L) {
        EXPECT_EQ(st.rings[L].slots, full.rings[L].slots) << L;
      }
      for (size_t i = 0; i < st.kv.size(); ++i) EXPECT_EQ(st.kv[i].pending_kv, full.kv[i].pending_kv);
    }
    // The state continues: a CED turn on top of it runs.
    auto more = Prompt(5, 7);
    std::vector<int32_t> ctx = prompt;
    ctx.insert(ctx.end(), more.begin(), more.end());
    EXPECT_TRUE(e.CedPrefill(&st, {ctx, {}, {}}, -1, &lg).ok());
  }
}

TEST_F(EngineTest, StateSerializesAndRestoresExactly) {
  Engine e(*model_);
  SequenceState st = NewState();
  std::vector<float> lg;
  ASSERT_TRUE(e.Prefill(&st, {Prompt(37, 8), {}, {}}, false, &lg).ok());
  const std::string bytes = st.Serialize(cfg());
  auto back = SequenceState::Deserialize(bytes, cfg());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->Serialize(cfg()), bytes);
  SequenceState restored = std::move(back).value();
  EXPECT_EQ(Greedy(e, &st, lg, 6), Greedy(e, &restored, lg, 6));
  // Damaged bytes are refused, never a crash.
  for (size_t cut : {size_t{0}, size_t{5}, bytes.size() / 2, bytes.size() - 1})
    EXPECT_FALSE(SequenceState::Deserialize(bytes.substr(0, cut), cfg()).ok()) << cut;
  std::string extra = bytes + "x";
  EXPECT_FALSE(SequenceState::Deserialize(extra, cfg()).ok());
  std::mt19937 rng(3);
  for (int i = 0; i < 200; ++i) {
    std::string b = bytes;
    b[rng() % 64] ^= static_cast<char>(1 + rng() % 255);  // header and counters
    auto r = SequenceState::Deserialize(b, cfg());
    if (r.ok()) {
      EXPECT_EQ(r->Serialize(cfg()).size(), b.size());
    }
  }
  ModelConfig other = cfg();
  other.window_size = 32;
  EXPECT_EQ(SequenceState::Deserialize(bytes, other).status().code(), StatusCode::kFailedPrecondition);
}

TEST_F(EngineTest, BadInputIsRefused) {
  Engine e(*model_);
  SequenceState st = NewState();
  std::vector<float> lg;
  EXPECT_EQ(e.Prefill(&st, {{}, {}, {}}, false, &lg).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(e.Prefill(&st, {{1, 2, cfg().vocab_size}, {}, {}}, false, &lg).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(e.Prefill(&st, {{1, -4}, {}, {}}, false, &lg).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(e.Prefill(&st, {{1, 2}, {1}, {}}, false, &lg).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.length, 0);
  ASSERT_TRUE(e.Prefill(&st, {{1, 2}, {}, {}}, false, &lg).ok());
  EXPECT_EQ(e.DecodeBatch({&st, &st}, {1, 2}, &lg).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(e.DecodeBatch({&st}, {1, 2}, &lg).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(e.DecodeBatch({}, {}, &lg).code(), StatusCode::kInvalidArgument);
  auto h = e.EncodePrefill(&st, {{5, 6}, {}, {}});
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(e.DecoderReplay(&st, {{1, 2, 5, 6}, {}, {}}, *h, 9, &lg).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(e.DecoderReplay(&st, {{1, 2}, {}, {}}, *h, 0, &lg).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ds41
