// DSpark draft model (MODEL.md §9.3): the target-state rings, the draft blocks of ForwardPass and the
// Markov / confidence heads. Same numerics rules as the backbone (MODEL.md §3): every linear in the
// canonical block order, bf16 after every op REF rounds.
#include "engine/layers/dspark.h"

#include <algorithm>

#include "engine/kernels/kernels.h"
#include "engine/kernels/numerics.h"
#include "engine/kernels/rope.h"
#include "engine/layers/forward.h"
#include "util/check.h"
#include "util/thread_pool.h"
#include "util/thread_scratch.h"

namespace ds41 {

DsparkState DsparkState::Create(const ModelConfig& c) {
  DS41_CHECK(c.has_dspark(), "DsparkState for a configuration without DSpark layers");
  DsparkState s;
  s.rings.resize(c.n_mtp_layers);
  for (WindowRing& r : s.rings) r.slots.assign(static_cast<size_t>(c.window_size) * c.window_entry_bytes(), 0);
  return s;
}

size_t DsparkState::ByteSize() const {
  size_t n = sizeof(*this);
  for (const WindowRing& r : rings) n += sizeof(r) + r.slots.size();
  return n;
}

void DsparkMainX(const Model& model, const float* hidden, int64_t n, float* main_x, ThreadPool* pool) {
  const ModelConfig& c = model.config();
  const DsparkWeights& dw = model.weights().dspark;
  const int D = c.dim;
  std::vector<float> proj(static_cast<size_t>(n) * D);
  QuantActs qa;
  Lin8(hidden, n, dw.main_proj, proj.data(), &qa, pool);  // Lin8 (MODEL.md §3 table)
  const float eps = static_cast<float>(c.norm_eps);
  ForRanges(pool, n, std::max<int64_t>(1, kParallelGrain / D), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) RmsNormRow(&proj[r * D], dw.main_norm, D, eps, &main_x[r * D]);
  });
}

void DsparkAppend(const Model& model, DsparkState* st, int64_t start, const float* hidden, int64_t n, ThreadPool* pool) {
  const ModelConfig& c = model.config();
  const int W = c.window_size, eb = c.window_entry_bytes(), D = c.dim;
  const size_t width = c.dspark_target_layer_ids.size() * static_cast<size_t>(D);
  for (WindowRing& ring : st->rings) {
    if (start > ring.end) {  // a gap: nothing before start can be attended
      ring.floor = ring.end = start;
    } else if (start < ring.end) {  // roll back: slots of [start, end) overwrote positions end - W ..
      ring.floor = std::max(ring.floor, ring.end - W);
      ring.end = start;
      ring.floor = std::min(ring.floor, ring.end);
    }
  }
  if (n <= 0) return;
  const int64_t skip = std::max<int64_t>(0, n - W);  // rows whose slots the later ones overwrite
  const int64_t m = n - skip;
  std::vector<float> main_x(static_cast<size_t>(m) * D);
  DsparkMainX(model, hidden + static_cast<size_t>(skip) * width, m, main_x.data(), pool);
  std::vector<int64_t> pos(m);
  for (int64_t i = 0; i < m; ++i) pos[i] = start + skip + i;
  std::vector<uint8_t> entries(static_cast<size_t>(m) * eb);
  QuantActs qa;
  for (int k = 0; k < c.n_mtp_layers; ++k) {
    // Ratio-0 layer: theta = rope_theta, no YaRN (MODEL.md §1.3); REF DSparkAttention's main_kv.
    ProduceWindowKv(c, model.weights().dspark.layers[k], model.rope(false), main_x.data(), m, pos.data(),
                    entries.data(), &qa, pool);
    WindowRing& ring = st->rings[k];
    for (int64_t i = 0; i < m; ++i) std::copy_n(&entries[static_cast<size_t>(i) * eb], eb, &ring.slots[(pos[i] % W) * eb]);
    ring.end = start + n;
  }
}

int32_t GreedyDraftPick(const float* logits, int vocab) {
  return static_cast<int32_t>(std::max_element(logits, logits + vocab) - logits);
}

// ---- the draft blocks as a ForwardPass ------------------------------------------------------------

void ForwardPass::EmbedDraft() { EmbedRows(); }  // drafts are text (image_ all 0) and have no Engram

void ForwardPass::RunDraftLayers(const std::vector<const std::vector<WindowRing>*>& rings) {
  std::vector<float> x, h;
  for (int k = 0; k < c_.n_mtp_layers; ++k) {
    const LayerWeights& w = model_.weights().dspark.layers[k];
    Mixes am = HcMixes(w.hc_attn_fn, w.hc_attn_base, w.hc_attn_scale);
    Collapse(pre_, &h);
    NormRows(h, w.attn_norm, &x);
    DraftAttention(k, rings, x, &h);
    Expand(h, am);
    Mixes fm = HcMixes(w.hc_ffn_fn, w.hc_ffn_base, w.hc_ffn_scale);
    Collapse(am.pre, &h);
    NormRows(h, w.ffn_norm, &x);
    MoeOf(w, c_.dspark_active(), /*cache_layer=*/-1, x, &h);  // drafts are text: image_ is all 0
    Expand(h, fm);
    pre_ = std::move(fm.pre);
  }
}

void ForwardPass::DraftAttention(int k, const std::vector<const std::vector<WindowRing>*>& rings,
                                 const std::vector<float>& x, std::vector<float>* out) {
  const LayerWeights& w = model_.weights().dspark.layers[k];
  const int H = c_.n_heads, hd = c_.head_dim, W = c_.window_size;
  const int eb = c_.window_entry_bytes();
  const RopeTable& rope = model_.rope(false);  // ratio 0
  std::vector<float> cq, cs, sn;
  QueryPath(w, rope, x, &cq, &cs, &sn);
  // The block's own keys, K = V, FP8 like any window entry (REF DSparkAttention).
  std::vector<uint8_t> block_kv(static_cast<size_t>(rows_) * eb);
  ProduceWindowKv(c_, w, rope, x.data(), rows_, pos_.data(), block_kv.data(), &qa_, pool_);

  AttendRows(cs, sn, [&](int64_t r, float* o) {
    const int s = seg_of_row_[r];
    const Segment& seg = segs_[s];
    const WindowRing& ring = (*rings[s])[k];
    // REF's key list: ring slots 0 .. min(W, end) - 1 in slot order, then the block's keys. A slot
    // whose position is absent (rolled back or before a gap) stays an empty place in the list.
    const int nring = static_cast<int>(std::min<int64_t>(W, ring.end));
    const int nkeys_max = nring + seg.n();
    thread_local ThreadScratch<float> keys;
    thread_local ThreadScratch<int> slot;
    if (keys.size() < static_cast<size_t>(nkeys_max) * hd) keys.resize(static_cast<size_t>(nkeys_max) * hd);
    if (slot.size() < static_cast<size_t>(nkeys_max)) slot.resize(nkeys_max);
    int nkeys = 0;
    const int64_t first = ring.first_valid(W);
    for (int sl = 0; sl < nring; ++sl) {
      const int64_t p = sl + (ring.end - 1 - sl) / W * W;  // the newest position < end in this slot
      if (p < first) continue;
      DecodeWindowEntry(&ring.slots[static_cast<size_t>(sl) * eb], hd, &keys[static_cast<size_t>(nkeys) * hd]);
      slot[nkeys++] = sl;
    }
    for (int b = 0; b < seg.n(); ++b) {
      DecodeWindowEntry(&block_kv[static_cast<size_t>(seg.row0 + b) * eb], hd, &keys[static_cast<size_t>(nkeys) * hd]);
      slot[nkeys++] = nring + b;
    }
    AttendKeyList(&q_[static_cast<size_t>(r) * H * hd], H, hd, keys.data(), slot.data(), nkeys, w.attn_sink, o);
  });
  OutputProjection(w, out);
}

void ForwardPass::DraftHidden(std::vector<float>* hidden, std::vector<float>* logits) const {
  const DsparkWeights& dw = model_.weights().dspark;
  Collapse(pre_, hidden);  // with the last draft layer's FFN-site pre (REF forward_head)
  std::vector<float> yn;
  NormRows(*hidden, dw.norm, &yn);
  logits->resize(static_cast<size_t>(rows_) * c_.vocab_size);
  MatMulBf16(yn.data(), rows_, model_.weights().head, logits->data(), pool_);  // the shared head, Lin32
}

// ---- the pass and the heads -----------------------------------------------------------------------

void DsparkPropose(const Model& model, const std::vector<DraftRequest>& requests, const DraftPicker& pick,
                   std::vector<Draft>* drafts, ThreadPool* pool) {
  const ModelConfig& c = model.config();
  const DsparkWeights& dw = model.weights().dspark;
  const int B = c.dspark_block_size, V = c.vocab_size, D = c.dim, R = c.dspark_markov_rank;
  const size_t n = requests.size();
  drafts->assign(n, Draft{});
  if (n == 0) return;
  std::vector<Segment> segs(n);
  std::vector<const std::vector<WindowRing>*> rings(n);
  for (size_t i = 0; i < n; ++i) {
    segs[i].start = requests[i].state->end();
    segs[i].tokens.assign(B, c.dspark_noise_token_id);
    segs[i].tokens[0] = requests[i].last_token;
    rings[i] = &requests[i].state->rings;
  }
  ForwardPass pass(model, &segs, pool);
  pass.EmbedDraft();
  pass.RunDraftLayers(rings);
  std::vector<float> hidden, logits;
  pass.DraftHidden(&hidden, &logits);

  for (size_t i = 0; i < n; ++i) {
    Draft& d = (*drafts)[i];
    d.start = segs[i].start;
    d.tokens.assign(B, 0);
    d.logits.assign(logits.begin() + static_cast<ptrdiff_t>(i * B * V), logits.begin() + static_cast<ptrdiff_t>((i + 1) * B * V));
    d.hidden.assign(hidden.begin() + static_cast<ptrdiff_t>(i * B * D), hidden.begin() + static_cast<ptrdiff_t>((i + 1) * B * D));
    d.confidence.assign(B, 0.0f);
  }
  // Slot by slot (each slot's Markov bias depends on the previous pick), every request at once.
  std::vector<float> emb(n * static_cast<size_t>(R)), bias(n * static_cast<size_t>(V));
  std::vector<float> cat(n * static_cast<size_t>(D + R)), conf(n);
  for (int s = 0; s < B; ++s) {
    for (size_t i = 0; i < n; ++i) {
      const int32_t prev = s == 0 ? requests[i].last_token : (*drafts)[i].tokens[s - 1];
      for (int k = 0; k < R; ++k) emb[i * R + k] = dw.markov_embed.at(prev, k);
    }
    MatMulBf16(emb.data(), static_cast<int64_t>(n), dw.markov_head, bias.data(), pool);  // Lin32 (REF: fp32 head)
    for (size_t i = 0; i < n; ++i) {
      Draft& d = (*drafts)[i];
      float* row = &d.logits[static_cast<size_t>(s) * V];
      for (int v = 0; v < V; ++v) row[v] = row[v] + bias[i * V + v];
      d.tokens[s] = pick(i, s, row);
      std::copy_n(&d.hidden[static_cast<size_t>(s) * D], D, &cat[i * (D + R)]);
      std::copy_n(&emb[i * R], R, &cat[i * (D + R) + D]);
    }
    // Confidence head: fp32 proj over [hidden (pre-norm collapse), markov embedding].
    MatMulBf16(cat.data(), static_cast<int64_t>(n), dw.confidence_proj, conf.data(), pool);
    for (size_t i = 0; i < n; ++i) (*drafts)[i].confidence[s] = conf[i];
  }
}

}  // namespace ds41
