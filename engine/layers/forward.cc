// The layer loop, embedding, mHC and head of ForwardPass (MODEL.md §4, §5, §9.1).
#include "engine/layers/forward.h"

#include <algorithm>
#include <cmath>

#include "engine/kernels/numerics.h"
#include "util/thread_pool.h"

namespace ds41 {

ForwardPass::ForwardPass(const Model& model, std::vector<Segment>* segments, ThreadPool* pool, ExpertCache* experts)
    : model_(model), c_(model.config()), segs_(*segments), pool_(pool), experts_(experts) {
  for (size_t s = 0; s < segs_.size(); ++s) {
    Segment& seg = segs_[s];
    seg.row0 = rows_;
    for (int i = 0; i < seg.n(); ++i) {
      pos_.push_back(seg.start + i);
      seg_of_row_.push_back(static_cast<int>(s));
      image_.push_back(seg.image.empty() ? 0 : seg.image[i]);
    }
    rows_ += seg.n();
  }
  topk_.assign(rows_, {});
  candidates_.assign(rows_, {});
  dspark_slot_.assign(c_.n_layers, -1);
  if (c_.has_dspark())
    for (size_t i = 0; i < c_.dspark_target_layer_ids.size(); ++i) dspark_slot_[c_.dspark_target_layer_ids[i]] = static_cast<int>(i);
}

void ForwardPass::Embed() {
  EmbedRows();
  ComputeEngramRows();
}

void ForwardPass::EmbedRows() {
  const int D = c_.dim, hc = c_.hc_mult;
  X_.assign(static_cast<size_t>(rows_) * hc * D, 0.0f);
  pre_.assign(static_cast<size_t>(rows_) * hc, 0.0f);
  size_t flagged = 0;  // image rows of the current segment so far: the index into its image_embeds
  for (int r = 0; r < rows_; ++r) {
    const Segment& seg = segs_[seg_of_row_[r]];
    const int i = r - seg.row0;
    if (i == 0) flagged = 0;
    float* x0 = &X_[static_cast<size_t>(r) * hc * D];
    if (image_[r] && !seg.image_embeds.empty() && i >= seg.image_embeds_from) {
      for (int d = 0; d < D; ++d) x0[d] = RoundBf16(seg.image_embeds[flagged * D + d]);
      ++flagged;
    } else {
      for (int d = 0; d < D; ++d) x0[d] = model_.weights().embed.at(seg.tokens[i], d);
    }
    for (int k = 1; k < hc; ++k) std::copy(x0, x0 + D, x0 + static_cast<size_t>(k) * D);
    pre_[static_cast<size_t>(r) * hc] = 1.0f;  // REF make_identity_pre_mix
  }
}

void ForwardPass::ComputeEngramRows() {
  const EngramLayout& el = model_.engram();
  if (el.layers().empty()) return;
  const int nl = static_cast<int>(el.layers().size()), cols = el.cols(), ng = el.max_ngram();
  const int64_t pad = model_.engram_token_map()[c_.engram_pad_id];
  engram_rows_.assign(static_cast<size_t>(rows_) * nl * cols, 0);
  std::vector<int64_t> tok(ng);
  for (Segment& seg : segs_) {
    const bool advance = seg.history.empty();
    std::vector<int64_t> hist = advance ? seg.state->engram_history : seg.history;
    hist.resize(ng - 1, kEngramBeforeStart);
    for (int i = 0; i < seg.n(); ++i) {
      const int r = seg.row0 + i;
      const int64_t cid = image_[r] ? kEngramDead : model_.engram_token_map()[seg.tokens[i]];
      el.TokenTuple(cid, hist.data(), pad, tok.data());
      for (int l = 0; l < nl; ++l) el.HashRows(l, tok.data(), &engram_rows_[(static_cast<size_t>(r) * nl + l) * cols]);
      hist.insert(hist.begin(), cid);
      hist.pop_back();
      if (seg.undo != nullptr) seg.undo->history.push_back(hist);
    }
    if (advance) seg.state->engram_history = hist;
  }
}

void ForwardPass::SetStream(const std::vector<uint16_t>& x, const std::vector<float>& pre) {
  X_.resize(x.size());
  for (size_t i = 0; i < x.size(); ++i) X_[i] = Bf16ToF32(x[i]);
  pre_ = pre;
  ComputeEngramRows();
}

// ---- mHC (MODEL.md §5) ---------------------------------------------------------------------------

void SplitSinkhorn(const float* m, const float* scale, const float* base, int hc, int iters, float eps, float* pre,
                   float* post, float* comb) {
  for (int i = 0; i < hc; ++i) pre[i] = SigmoidF(m[i] * scale[0] + base[i]) + eps;
  for (int j = 0; j < hc; ++j) post[j] = 2.0f * SigmoidF(m[hc + j] * scale[1] + base[hc + j]);
  float* C = comb;
  for (int k = 0; k < hc * hc; ++k) C[k] = m[2 * hc + k] * scale[2] + base[2 * hc + k];
  auto row_sum = [&](int i) {
    float s = 0.0f;
    for (int j = 0; j < hc; ++j) s += C[i * hc + j];
    return s;
  };
  auto col_sum = [&](int j) {
    float s = 0.0f;
    for (int i = 0; i < hc; ++i) s += C[i * hc + j];
    return s;
  };
  auto normalize_cols = [&] {
    for (int j = 0; j < hc; ++j) {
      const float s = col_sum(j) + eps;
      for (int i = 0; i < hc; ++i) C[i * hc + j] = C[i * hc + j] / s;
    }
  };
  for (int i = 0; i < hc; ++i) {  // row softmax, then + eps
    float mx = C[i * hc];
    for (int j = 1; j < hc; ++j) mx = std::max(mx, C[i * hc + j]);
    for (int j = 0; j < hc; ++j) C[i * hc + j] = ExpF(C[i * hc + j] - mx);
    const float s = row_sum(i);
    for (int j = 0; j < hc; ++j) C[i * hc + j] = C[i * hc + j] / s + eps;
  }
  normalize_cols();
  for (int it = 0; it < iters - 1; ++it) {
    for (int i = 0; i < hc; ++i) {
      const float s = row_sum(i) + eps;
      for (int j = 0; j < hc; ++j) C[i * hc + j] = C[i * hc + j] / s;
    }
    normalize_cols();
  }
}

ForwardPass::Mixes ForwardPass::HcMixes(const F32View& fn, const F32View& base, const F32View& scale) const {
  const int hc = c_.hc_mult, HD = c_.hc_dim(), mix = c_.mix_hc();
  Mixes out;
  out.pre.resize(static_cast<size_t>(rows_) * hc);
  out.post.resize(static_cast<size_t>(rows_) * hc);
  out.comb.resize(static_cast<size_t>(rows_) * hc * hc);
  std::vector<float> m(static_cast<size_t>(rows_) * mix);
  MatMulF32Fp64(X_.data(), rows_, fn, m.data(), pool_);
  const float eps = static_cast<float>(c_.norm_eps), hc_eps = static_cast<float>(c_.hc_eps);
  float sc[3];
  for (int k = 0; k < 3; ++k) sc[k] = scale.at(k);
  std::vector<float> bvec(mix);
  for (int k = 0; k < mix; ++k) bvec[k] = base.at(k);
  ForRows(rows_, HD, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float rs = RsqrtF(MeanSquare(&X_[static_cast<size_t>(r) * HD], HD) + eps);
      float* mr = &m[static_cast<size_t>(r) * mix];
      for (int k = 0; k < mix; ++k) mr[k] = mr[k] * rs;
      SplitSinkhorn(mr, sc, bvec.data(), hc, c_.hc_sinkhorn_iters, hc_eps, &out.pre[static_cast<size_t>(r) * hc],
                    &out.post[static_cast<size_t>(r) * hc], &out.comb[static_cast<size_t>(r) * hc * hc]);
    }
  });
  return out;
}

void ForwardPass::ForRows(int64_t rows, int64_t row_cost, const std::function<void(int64_t, int64_t)>& fn) const {
  ForRanges(pool_, rows, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(row_cost, 1)), fn);
}

void ForwardPass::Collapse(const std::vector<float>& pre, std::vector<float>* y) const {
  const int hc = c_.hc_mult, D = c_.dim;
  y->resize(static_cast<size_t>(rows_) * D);
  ForRows(rows_, static_cast<int64_t>(hc) * D, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* X = &X_[static_cast<size_t>(r) * hc * D];
      const float* p = &pre[static_cast<size_t>(r) * hc];
      float* out = &(*y)[static_cast<size_t>(r) * D];
      for (int d = 0; d < D; ++d) {
        float s = p[0] * X[d];
        for (int i = 1; i < hc; ++i) s = s + p[i] * X[static_cast<size_t>(i) * D + d];
        out[d] = RoundBf16(s);
      }
    }
  });
}

void ForwardPass::Expand(const std::vector<float>& h, const Mixes& m) {
  const int hc = c_.hc_mult, D = c_.dim;
  ForRows(rows_, static_cast<int64_t>(hc) * hc * D, [&](int64_t r0, int64_t r1) {
    std::vector<float> Xr(static_cast<size_t>(hc) * D);
    for (int64_t r = r0; r < r1; ++r) {
      float* X = &X_[static_cast<size_t>(r) * hc * D];
      std::copy(X, X + static_cast<size_t>(hc) * D, Xr.begin());
      const float* post = &m.post[static_cast<size_t>(r) * hc];
      const float* C = &m.comb[static_cast<size_t>(r) * hc * hc];
      const float* hr = &h[static_cast<size_t>(r) * D];
      for (int j = 0; j < hc; ++j) {
        for (int d = 0; d < D; ++d) {
          float s = C[j] * Xr[d];  // C[0][j] moves copy 0 into copy j
          for (int i = 1; i < hc; ++i) s = s + C[i * hc + j] * Xr[static_cast<size_t>(i) * D + d];
          X[static_cast<size_t>(j) * D + d] = RoundBf16(post[j] * hr[d] + s);
        }
      }
    }
  });
}

void ForwardPass::NormRows(const std::vector<float>& x, const Bf16View& w, std::vector<float>* y) const {
  y->resize(x.size());
  RmsNormRows(x.data(), static_cast<int64_t>(x.size()) / w.rows, w, static_cast<float>(c_.norm_eps), y->data(), pool_);
}

void RmsNormRows(const float* x, int64_t rows, const Bf16View& w, float eps, float* y, ThreadPool* pool) {
  const int64_t n = w.rows;
  ForRanges(pool, rows, std::max<int64_t>(1, kParallelGrain / n), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) RmsNormRow(&x[r * n], w, n, eps, &y[r * n]);
  });
}

// ---- layer loop ----------------------------------------------------------------------------------

void ForwardPass::RunLayers(int begin, int end) {
  std::vector<float> x, h;
  for (int L = begin; L < end; ++L) {
    const LayerWeights& w = model_.weights().layers[L];
    if (c_.roles[L].engram_slot >= 0) EngramBlock(L);
    if (dspark_hidden != nullptr && dspark_slot_[L] >= 0) RecordDsparkHidden(dspark_slot_[L]);
    Mixes am = HcMixes(w.hc_attn_fn, w.hc_attn_base, w.hc_attn_scale);
    Collapse(pre_, &h);
    NormRows(h, w.attn_norm, &x);
    Attention(L, x, &h);
    Expand(h, am);
    Mixes fm = HcMixes(w.hc_ffn_fn, w.hc_ffn_base, w.hc_ffn_scale);
    Collapse(am.pre, &h);  // single-pass mHC: the attention site's pre collapses the FFN input
    NormRows(h, w.ffn_norm, &x);
    Moe(L, x, &h);
    Expand(h, fm);
    pre_ = std::move(fm.pre);  // ... and the FFN site's pre collapses the next layer's input
    if (L == c_.ced_split - 1) RecordEncoderOutput();
    if (on_layer_done) on_layer_done(L, X_);
  }
}

void ForwardPass::RecordDsparkHidden(int slot) {
  // REF: the mean over the hc copies of the layer's input stream (a bf16 mean: fp32 sum in copy
  // order, divided, rounded once); MODEL.md §9.3.
  const int hc = c_.hc_mult, D = c_.dim;
  const size_t width = c_.dspark_target_layer_ids.size() * static_cast<size_t>(D);
  if (dspark_hidden->size() != static_cast<size_t>(rows_) * width) dspark_hidden->assign(static_cast<size_t>(rows_) * width, 0.0f);
  for (int r = 0; r < rows_; ++r) {
    const float* X = &X_[static_cast<size_t>(r) * hc * D];
    float* out = &(*dspark_hidden)[static_cast<size_t>(r) * width + static_cast<size_t>(slot) * D];
    for (int d = 0; d < D; ++d) {
      float s = X[d];
      for (int i = 1; i < hc; ++i) s = s + X[static_cast<size_t>(i) * D + d];
      out[d] = RoundBf16(s / static_cast<float>(hc));
    }
  }
}

void ForwardPass::RecordEncoderOutput() {
  const int hc = c_.hc_mult, HD = c_.hc_dim(), w = c_.window_size;
  for (Segment& seg : segs_) {
    StreamRing& ring = seg.state->encoder_out;
    if (ring.end != seg.start) ring.floor = ring.end = seg.start;  // a discontinuity starts afresh
    for (int i = 0; i < seg.n(); ++i) {
      const int r = seg.row0 + i;
      const int64_t slot = (seg.start + i) % w;
      for (int k = 0; k < HD; ++k) ring.x[slot * HD + k] = F32ToBf16(X_[static_cast<size_t>(r) * HD + k]);
      for (int k = 0; k < hc; ++k) ring.pre[slot * hc + k] = pre_[static_cast<size_t>(r) * hc + k];
    }
    ring.end = seg.start + seg.n();
  }
}

void ForwardPass::ProjectCedSource(std::vector<uint8_t>* produced) {
  const int E = c_.ced_split;
  const LayerWeights& w = model_.weights().layers[E];
  std::vector<float> h, x;
  Collapse(pre_, &h);
  NormRows(h, w.attn_norm, &x);
  ProduceWindowEntries(E, x, produced);
  Compress(E, x);
  CommitWindow(E, *produced);
}

void ForwardPass::Logits(const std::vector<int>& rows, std::vector<float>* out) const {
  const int hc = c_.hc_mult, D = c_.dim, V = c_.vocab_size;
  std::vector<float> y(static_cast<size_t>(rows.size()) * D), yn(y.size());
  for (size_t k = 0; k < rows.size(); ++k) {
    const int r = rows[k];
    const float* X = &X_[static_cast<size_t>(r) * hc * D];
    const float* p = &pre_[static_cast<size_t>(r) * hc];
    for (int d = 0; d < D; ++d) {
      float s = p[0] * X[d];
      for (int i = 1; i < hc; ++i) s = s + p[i] * X[static_cast<size_t>(i) * D + d];
      y[k * D + d] = RoundBf16(s);
    }
    RmsNormRow(&y[k * D], model_.weights().norm, D, static_cast<float>(c_.norm_eps), &yn[k * D]);
  }
  out->resize(rows.size() * static_cast<size_t>(V));
  MatMulBf16(yn.data(), static_cast<int64_t>(rows.size()), model_.weights().head, out->data(), pool_);
}

}  // namespace ds41
