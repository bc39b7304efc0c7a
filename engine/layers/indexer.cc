// Indexer of ForwardPass (MODEL.md §6.6-§6.8): FP4 query heads against the KV source's index keys,
// bf16 scores as the reference rounds them, the candidate pool of the publisher, and top-k with
// ties broken by the lower position (§11 item 4).
#include <algorithm>
#include <cmath>

#include "engine/kernels/matmul.h"
#include "engine/kernels/numerics.h"
#include "engine/kernels/vector_ops.h"
#include "engine/layers/forward.h"
#include "engine/layers/top_k.h"
#include "util/thread_pool.h"

namespace ds41 {

void ForwardPass::Index(int L, const std::vector<float>& x, const std::vector<float>& cq) {
  const LayerRole& role = c_.roles[L];
  const LayerWeights& w = model_.weights().layers[L];
  const int nh = c_.index_n_heads, ihd = c_.index_head_dim, rd = c_.rope_head_dim, m = role.ratio;
  const RopeTable& rope = model_.rope(/*yarn=*/true);

  // Query heads: RoPE on the last rd dims, then QDQ4e8 per 32 (§6.6).
  std::vector<float> qi(static_cast<size_t>(rows_) * nh * ihd);
  Lin8(cq.data(), rows_, w.idx_wq_b, qi.data(), &qa_, pool_);
  std::vector<float> cs(rd / 2), sn(rd / 2);
  std::vector<uint8_t> codes(32);
  for (int r = 0; r < rows_; ++r) {
    rope.Angles(pos_[r], cs.data(), sn.data());
    for (int h = 0; h < nh; ++h) {
      float* v = &qi[(static_cast<size_t>(r) * nh + h) * ihd];
      ApplyRope(v + (ihd - rd), rd / 2, cs.data(), sn.data(), false);
      for (int g = 0; g < ihd / 32; ++g) {
        const float s = QuantizeQdq4e8(v + g * 32, 32, codes.data()).scale;
        for (int k = 0; k < 32; ++k) v[g * 32 + k] = E2m1ToF32(codes[k]) * s;
      }
    }
  }
  // Head weights: bf16(weights_proj(x)) * index_head_dim^-1/2 * index_n_heads^-1/2, rounded to bf16.
  std::vector<float> hw(static_cast<size_t>(rows_) * nh);
  MatMulBf16(x.data(), rows_, w.idx_weights_proj, hw.data(), pool_);
  const float wscale = static_cast<float>(std::pow(static_cast<double>(ihd), -0.5) * std::pow(static_cast<double>(nh), -0.5));
  for (float& v : hw) v = RoundBf16(RoundBf16(v) * wscale);

  for (const Segment& seg : segs_) {
    const KvSourceCache& kvs = seg.state->kv[role.kv_slot];
    const int64_t E = kvs.entries(m);
    std::vector<float> keys(static_cast<size_t>(E) * ihd);
    const int ib = c_.index_key_bytes();
    for (int64_t j = 0; j < E; ++j) DecodeIndexKey(&kvs.index_keys[static_cast<size_t>(j) * ib], ihd, &keys[static_cast<size_t>(j) * ihd]);
    // The rest of a row once its scores are known: the candidate pool, then top-k.
    auto select = [&](int r, std::vector<float>& score) {
      const int64_t V = static_cast<int64_t>(score.size());
      if (role.candidate_publisher) {
        // Blocks of candidate_block_size positions scored by their best position; the newest
        // (partially filled) block is always kept (§6.7).
        const int bs = c_.candidate_block_size;
        const int64_t nb = (V + bs - 1) / bs;
        std::vector<float> bscore(static_cast<size_t>(nb), -INFINITY);
        for (int64_t j = 0; j < V; ++j) bscore[j / bs] = std::max(bscore[j / bs], score[j]);
        if (V > 0) bscore[(V - 1) / bs] = INFINITY;
        std::vector<int32_t> keep = TopKByScore(bscore, c_.candidate_topk_blocks);
        candidates_[r].assign(static_cast<size_t>(nb), 0);
        for (int32_t b : keep) candidates_[r][b] = 1;
      } else if (role.candidate_consumer) {
        const int bs = c_.candidate_block_size;
        for (int64_t j = 0; j < V; ++j)
          if (j / bs >= static_cast<int64_t>(candidates_[r].size()) || !candidates_[r][j / bs]) score[j] = -INFINITY;
      }
      topk_[r] = TopKByScore(score, c_.index_topk);  // ascending, as attention reads them
    };
    // Rows in groups against blocks of keys: a block (128 KB at 64 dims) comes from memory once per
    // group and then from L2, where row by row every row streamed all the keys, which stop fitting
    // any cache near 32k entries (10 MB at 40k): the time per token then grew faster than the
    // arithmetic. A key's score depends on that key alone, so the bits are the same.
    // Groups of up to 8 rows, smaller when there are too few rows to keep every thread busy.
    const int group = std::clamp(seg.n() / (pool_ ? pool_->threads() : 1), 1, 8);
    constexpr int64_t kKeyBlock = 512;
    auto score_group = [&](int64_t g) {
      const int i0 = static_cast<int>(g) * group, n = std::min(group, seg.n() - i0);
      std::vector<std::vector<float>> score(static_cast<size_t>(n));
      // Heads are the SIMD lanes: each row's q transposed to [ihd][nh].
      std::vector<float> qT(static_cast<size_t>(n) * ihd * nh), qk(static_cast<size_t>(kKeyBlock) * nh);
      int64_t most = 0;
      for (int i = 0; i < n; ++i) {
        const int r = seg.row0 + i0 + i;
        const int64_t V = std::min<int64_t>((pos_[r] + 1) / m, E);  // visible entries
        score[i].resize(static_cast<size_t>(V));
        most = std::max(most, V);
        float* t = &qT[static_cast<size_t>(i) * ihd * nh];
        for (int h = 0; h < nh; ++h)
          for (int d = 0; d < ihd; ++d) t[static_cast<size_t>(d) * nh + h] = qi[(static_cast<size_t>(r) * nh + h) * ihd + d];
        CountWork(static_cast<uint64_t>(V) * nh * ihd, 0);
      }
      for (int64_t k0 = 0; k0 < most; k0 += kKeyBlock)
        for (int i = 0; i < n; ++i) {
          const int64_t nk = std::min<int64_t>(kKeyBlock, static_cast<int64_t>(score[i].size()) - k0);
          if (nk <= 0) continue;
          const int r = seg.row0 + i0 + i;
          HeadScores(&qT[static_cast<size_t>(i) * ihd * nh], nh, ihd, &keys[static_cast<size_t>(k0) * ihd], static_cast<int>(nk), qk.data());
          // bf16(q.k), relu, bf16(x w), summed over heads, bf16 (REF's roundings).
          IndexerKeyScores(qk.data(), nh, static_cast<int>(nk), &hw[static_cast<size_t>(r) * nh], &score[i][k0]);
        }
      for (int i = 0; i < n; ++i) select(seg.row0 + i0 + i, score[i]);
    };
    const int64_t groups = (seg.n() + group - 1) / group;
    if (pool_) {
      pool_->ParallelFor(groups, score_group);
    } else {
      for (int64_t g = 0; g < groups; ++g) score_group(g);
    }
  }
}

}  // namespace ds41
