// CSA2 attention of ForwardPass (MODEL.md §6.1, §6.3, §6.9): query path, FP8 window KV, sparse
// attention over window + selected compressed entries with the sink, output de-rotation and the
// grouped low-rank output projection.
#include <algorithm>
#include <cmath>

#include "engine/layers/forward.h"
#include "engine/kernels/matmul.h"
#include "engine/kernels/numerics.h"
#include "engine/kernels/vector_ops.h"
#include "util/check.h"
#include "util/thread_pool.h"
#include "util/thread_scratch.h"

namespace ds41 {

void DecodeWindowEntry(const uint8_t* e, int hd, float* out) {
  for (int g = 0; g < hd / 32; ++g) {
    const float s = E8m0ToF32(e[hd + g]);
    for (int k = 0; k < 32; ++k) out[g * 32 + k] = E4m3ToF32(e[g * 32 + k]) * s;
  }
}

namespace {
// FP4 codes (two per byte, low nibble first) times one scale per `group` values; the products are
// exact (2 x 4 significant bits), so the order does not matter.
template <int group, class Scale>
void DecodeFp4Groups(const uint8_t* codes, Scale scale, int n, float* out) {
  for (int g = 0; g < n / group; ++g) {
    const float s = scale(g);
    const uint8_t* c = codes + g * (group / 2);
    float* o = out + g * group;
    for (int j = 0; j < group / 2; ++j) {
      o[2 * j] = E2m1ToF32(c[j] & 0xF) * s;
      o[2 * j + 1] = E2m1ToF32(c[j] >> 4) * s;
    }
  }
}
}  // namespace

void DecodeMainKv(const uint8_t* e, int hd, float* out) {
  DecodeFp4Groups<16>(e, [&](int g) { return E4m3ToF32(e[hd / 2 + g]); }, hd, out);
}

void DecodeIndexKey(const uint8_t* e, int ihd, float* out) {
  DecodeFp4Groups<32>(e, [&](int g) { return E8m0ToF32(e[ihd / 2 + g]); }, ihd, out);
}

void ProduceWindowKv(const ModelConfig& c, const LayerWeights& w, const RopeTable& rope, const float* x, int64_t rows,
                     const int64_t* pos, uint8_t* entries, QuantActs* qa, ThreadPool* pool) {
  const int hd = c.head_dim, rd = c.rope_head_dim, eb = c.window_entry_bytes();
  std::vector<float> kv(static_cast<size_t>(rows) * hd), kvn(kv.size());
  Lin8(x, rows, w.wkv, kv.data(), qa, pool);
  RmsNormRows(kv.data(), rows, w.kv_norm, static_cast<float>(c.norm_eps), kvn.data(), pool);
  ForRanges(pool, rows, std::max<int64_t>(1, kParallelGrain / hd), [&](int64_t r0, int64_t r1) {
    std::vector<float> cs(rd / 2), sn(rd / 2);
    for (int64_t r = r0; r < r1; ++r) {
      float* v = &kvn[static_cast<size_t>(r) * hd];
      rope.Angles(pos[r], cs.data(), sn.data());
      ApplyRope(v + (hd - rd), rd / 2, cs.data(), sn.data(), /*inverse=*/false);
      uint8_t* e = &entries[static_cast<size_t>(r) * eb];
      for (int g = 0; g < hd / 32; ++g) e[hd + g] = QuantizeQdq8(v + g * 32, 32, e + g * 32).scale_e8m0;
    }
  });
}

void ForwardPass::ProduceWindowEntries(int L, const std::vector<float>& x, std::vector<uint8_t>* entries) const {
  entries->assign(static_cast<size_t>(rows_) * c_.window_entry_bytes(), 0);
  ProduceWindowKv(c_, model_.weights().layers[L], model_.rope(c_.roles[L].yarn), x.data(), rows_, pos_.data(),
                  entries->data(), &qa_, pool_);
}

const uint8_t* ForwardPass::WindowEntry(int L, const Segment& seg, int64_t p, const std::vector<uint8_t>& nw) const {
  const int eb = c_.window_entry_bytes();
  if (seg.ced_window != nullptr && L == c_.ced_split) {
    const CedWindow& cw = *seg.ced_window;
    const int64_t n = static_cast<int64_t>(cw.entries.size()) / eb;
    return (p >= cw.start && p < cw.start + n) ? &cw.entries[(p - cw.start) * eb] : nullptr;
  }
  if (p >= seg.start) return &nw[static_cast<size_t>(seg.row0 + (p - seg.start)) * eb];
  const WindowRing& ring = seg.state->rings[L];
  if (p < ring.first_valid(c_.window_size) || p >= ring.end) return nullptr;
  return &ring.slots[(p % c_.window_size) * eb];
}

void ForwardPass::CommitWindow(int L, const std::vector<uint8_t>& nw) {
  const int eb = c_.window_entry_bytes(), W = c_.window_size;
  for (const Segment& seg : segs_) {
    WindowRing& ring = seg.state->rings[L];
    if (seg.ced_window != nullptr && L == c_.ced_split) {
      const CedWindow& cw = *seg.ced_window;
      const int64_t n = static_cast<int64_t>(cw.entries.size()) / eb;
      for (int64_t p = std::max(cw.start, cw.start + n - W); p < cw.start + n; ++p)
        std::copy_n(&cw.entries[(p - cw.start) * eb], eb, &ring.slots[(p % W) * eb]);
      ring.floor = cw.start;
      ring.end = cw.start + n;
      continue;
    }
    DS41_CHECK(ring.end == seg.start, "window ring of layer " << L << " ends at " << ring.end
                                                              << ", segment starts at " << seg.start);
    const int64_t end = seg.start + seg.n();
    for (int64_t p = std::max(seg.start, end - W); p < end; ++p)
      std::copy_n(&nw[static_cast<size_t>(seg.row0 + (p - seg.start)) * eb], eb, &ring.slots[(p % W) * eb]);
    ring.end = end;
  }
}

void ForwardPass::AttendRow(int L, const Segment& seg, int r, const float* q, const std::vector<uint8_t>& nw,
                            float* o) const {
  const LayerRole& role = c_.roles[L];
  const LayerWeights& w = model_.weights().layers[L];
  const int H = c_.n_heads, hd = c_.head_dim, W = c_.window_size;
  const int64_t t = pos_[r];
  int64_t lo = t - W + 1;
  if (seg.ced_window != nullptr && L == c_.ced_split) {
    lo = std::max(lo, seg.ced_window->start);
  } else {
    lo = std::max(lo, seg.state->rings[L].floor);
  }
  lo = std::max<int64_t>(lo, 0);

  // Per-thread buffers that only grow: a prefill attends every row, and fresh zero-filled vectors
  // of ~2 MB per row (keys, scores, transposed query) cost more than filling them.
  thread_local ThreadScratch<float> keys;
  thread_local ThreadScratch<int> slot;
  auto at_least = [](auto& v, size_t n) {
    if (v.size() < n) v.resize(n);
  };

  // The key list of MODEL.md §6.9 in canonical slot order: `window` slots holding the window
  // positions ascending (absent ones last), then the selected compressed entries ascending. The
  // online softmax runs over blocks of 64 slots, so each key's slot decides its block.
  const size_t max_keys = static_cast<size_t>(t - lo + 1) + (role.ratio > 0 ? topk_[r].size() : 0);
  at_least(keys, max_keys * hd);
  at_least(slot, max_keys);
  int nkeys = 0;
  for (int64_t p = lo; p <= t; ++p) {
    const uint8_t* e = WindowEntry(L, seg, p, nw);
    if (e == nullptr) continue;
    DecodeWindowEntry(e, hd, &keys[static_cast<size_t>(nkeys) * hd]);
    slot[nkeys++] = static_cast<int>(p - lo);
  }
  if (role.ratio > 0) {
    const KvSourceCache& kvs = seg.state->kv[role.kv_slot];
    const int mb = c_.main_kv_bytes();
    int k = 0;
    for (int32_t j : topk_[r]) {
      DecodeMainKv(&kvs.main_kv[static_cast<size_t>(j) * mb], hd, &keys[static_cast<size_t>(nkeys) * hd]);
      slot[nkeys++] = W + k++;
    }
  }

  AttendKeyList(q, H, hd, keys.data(), slot.data(), nkeys, w.attn_sink, o);
}

void AttendKeyList(const float* q, int H, int hd, const float* keys, const int* slot, int nkeys, const F32View& sink,
                   float* o) {
  thread_local ThreadScratch<float> qT, s;
  thread_local ThreadScratch<double> pb, pv;
  auto at_least = [](auto& v, size_t n) {
    if (v.size() < n) v.resize(n);
  };
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
  CountWork(2ull * static_cast<uint64_t>(H) * nkeys * hd, 0);  // q.k and p.v
  // Scores of every head for every key: heads are the SIMD lanes (q transposed to [hd][H]).
  at_least(qT, static_cast<size_t>(hd) * H);
  at_least(s, static_cast<size_t>(nkeys) * H);
  for (int h = 0; h < H; ++h)
    for (int d = 0; d < hd; ++d) qT[static_cast<size_t>(d) * H + h] = q[static_cast<size_t>(h) * hd + d];
  HeadScores(qT.data(), H, hd, keys, nkeys, s.data());
  ScaleInPlace(s.data(), static_cast<int64_t>(nkeys) * H, scale);
  // Online softmax block by block, every head at once (each head's arithmetic is its own, in the
  // order of MODEL.md §6.9): the block's P.V is then one pass over its keys for all heads.
  std::vector<float> m(H, -1e30f), l(H, 0.0f), sf(H), acc(static_cast<size_t>(H) * hd, 0.0f);
  at_least(pb, static_cast<size_t>(H) * 64);
  at_least(pv, static_cast<size_t>(H) * hd);
  for (int a = 0; a < nkeys;) {
    const int block = slot[a] / 64;
    int b = a;
    while (b < nkeys && slot[b] / 64 == block) ++b;
    const int nk = b - a;
    SoftmaxBlock(&s[static_cast<size_t>(a) * H], H, nk, m.data(), l.data(), sf.data(), pb.data());  // bf16 probabilities
    BlockPv(pb.data(), H, nk, &keys[static_cast<size_t>(a) * hd], hd, pv.data());
    RescaleAdd(acc.data(), sf.data(), pv.data(), H, hd);
    a = b;
  }
  for (int h = 0; h < H; ++h) {
    const float lh = l[h] + ExpF(sink.at(h) - m[h]);  // the sink joins the denominator only
    for (int d = 0; d < hd; ++d) o[static_cast<size_t>(h) * hd + d] = RoundBf16(acc[static_cast<size_t>(h) * hd + d] / lh);
  }
}

void ForwardPass::Attention(int L, const std::vector<float>& x, std::vector<float>* out) {
  const LayerRole& role = c_.roles[L];
  const LayerWeights& w = model_.weights().layers[L];
  const int H = c_.n_heads, hd = c_.head_dim;
  const RopeTable& rope = model_.rope(role.yarn);

  // Query path (§6.1); cq is shared with the indexer.
  std::vector<float> cq, cs, sn;
  QueryPath(w, rope, x, &cq, &cs, &sn);
  std::vector<float>& q = q_;

  // KV: window entries for every row (§6.3), then the compressor and indexer (§6.4-§6.8).
  std::vector<uint8_t> nw;
  ProduceWindowEntries(L, x, &nw);
  if (role.ratio > 0) {
    if (role.owns_compressor) Compress(L, x);
    if (role.owns_indexer) Index(L, x, cq);
  }

  // Sparse attention with sink.
  AttendRows(cs, sn, [&](int64_t r, float* o) {
    AttendRow(L, segs_[seg_of_row_[r]], static_cast<int>(r), &q[static_cast<size_t>(r) * H * hd], nw, o);
  });
  CommitWindow(L, nw);

  OutputProjection(w, out);
}

void ForwardPass::QueryPath(const LayerWeights& w, const RopeTable& rope, const std::vector<float>& x,
                            std::vector<float>* cq, std::vector<float>* cs_out, std::vector<float>* sn_out) {
  const int H = c_.n_heads, hd = c_.head_dim, rd = c_.rope_head_dim, nope = hd - rd;
  std::vector<float> cq_raw(static_cast<size_t>(rows_) * c_.q_lora_rank);
  Lin8(x.data(), rows_, w.wq_a, cq_raw.data(), &qa_, pool_);
  NormRows(cq_raw, w.q_norm, cq);
  // q_ and o_ are the pass's largest buffers (a prefill's are hundreds of MB): kept across layers
  // rather than allocated, zeroed and faulted in again by each one.
  std::vector<float>& q = q_;
  q.resize(static_cast<size_t>(rows_) * H * hd);
  Lin8(cq->data(), rows_, w.wq_b, q.data(), &qa_, pool_);
  std::vector<float>& cs = *cs_out;
  std::vector<float>& sn = *sn_out;
  cs.assign(static_cast<size_t>(rows_) * (rd / 2), 0.0f);
  sn.assign(cs.size(), 0.0f);
  ForRows(rows_, static_cast<int64_t>(H) * rd, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      rope.Angles(pos_[r], &cs[static_cast<size_t>(r) * (rd / 2)], &sn[static_cast<size_t>(r) * (rd / 2)]);
      for (int h = 0; h < H; ++h)
        ApplyRope(&q[(static_cast<size_t>(r) * H + h) * hd + nope], rd / 2, &cs[static_cast<size_t>(r) * (rd / 2)],
                  &sn[static_cast<size_t>(r) * (rd / 2)], false);
    }
  });
}

void ForwardPass::AttendRows(const std::vector<float>& cs, const std::vector<float>& sn,
                             const std::function<void(int64_t row, float* o)>& attend) {
  const int H = c_.n_heads, hd = c_.head_dim, rd = c_.rope_head_dim, nope = hd - rd;
  std::vector<float>& o = o_;
  o.resize(static_cast<size_t>(rows_) * H * hd);
  auto row = [&](int64_t r) {
    float* orow = &o[static_cast<size_t>(r) * H * hd];
    attend(r, orow);
    for (int h = 0; h < H; ++h)
      ApplyRope(&orow[static_cast<size_t>(h) * hd + nope], rd / 2, &cs[static_cast<size_t>(r) * (rd / 2)],
                &sn[static_cast<size_t>(r) * (rd / 2)], /*inverse=*/true);
  };
  if (pool_) {
    pool_->ParallelFor(rows_, row);
  } else {
    for (int r = 0; r < rows_; ++r) row(r);
  }
}

void ForwardPass::OutputProjection(const LayerWeights& w, std::vector<float>* out) {
  const int H = c_.n_heads, hd = c_.head_dim;
  const std::vector<float>& o = o_;
  // Grouped low-rank output projection: wo_a is block diagonal over groups of heads, applied to
  // bf16 activations without quantization (§6.9), then wo_b as Lin8.
  const int G = c_.o_groups, in_g = c_.heads_per_group() * hd, olr = c_.o_lora_rank;
  std::vector<float> og(static_cast<size_t>(rows_) * in_g), rg(static_cast<size_t>(rows_) * olr);
  std::vector<float> ra(static_cast<size_t>(rows_) * G * olr);
  for (int g = 0; g < G; ++g) {
    ForRows(rows_, in_g, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r)
        std::copy_n(&o[static_cast<size_t>(r) * H * hd + static_cast<size_t>(g) * in_g], in_g, &og[static_cast<size_t>(r) * in_g]);
    });
    MatMulFp8Unquantized(og.data(), rows_, w.wo_a.Rows(static_cast<int64_t>(g) * olr, olr), rg.data(), pool_);
    ForRows(rows_, olr, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r)
        for (int n = 0; n < olr; ++n)
          ra[static_cast<size_t>(r) * G * olr + static_cast<size_t>(g) * olr + n] = RoundBf16(rg[static_cast<size_t>(r) * olr + n]);
    });
  }
  out->resize(static_cast<size_t>(rows_) * c_.dim);
  Lin8(ra.data(), rows_, w.wo_b, out->data(), &qa_, pool_);
}

}  // namespace ds41
