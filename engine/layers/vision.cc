// Vision tower and aligner (MODEL.md §2.5, §9.2; REF vision.py). Rounding points as REF's bf16
// modules have them; summation orders are the engine's canonical ones (docs/numerics.md), which the
// oracle reproduces.
#include "engine/layers/vision.h"

#include <algorithm>
#include <cmath>

#include "engine/kernels/kernels.h"
#include "engine/kernels/numerics.h"
#include "engine/kernels/vector_ops.h"
#include "util/check.h"
#include "util/thread_pool.h"

namespace ds41 {
namespace {

constexpr float kVisionNormEps = 1e-6f;  // REF vision RMSNorm default, not the text model's 1e-20
constexpr int64_t kQueryChunk = 256;     // attention rows per score matrix (bounds its memory)

// y [rows, w.rows] = bf16(x · wᵀ + b): REF's bf16 nn.Linear with bias (fp32 accumulate, one rounding).
void LinearBias(const float* x, int64_t rows, const Bf16View& w, const Bf16View* b, float* y, ThreadPool* pool) {
  MatMulBf16(x, rows, w, y, pool);
  const int64_t n = w.rows;
  ForRanges(pool, rows, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(n, 1)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      float* yr = y + r * n;
      if (b != nullptr)
        for (int64_t i = 0; i < n; ++i) yr[i] = RoundBf16(yr[i] + b->at(i));
      else
        for (int64_t i = 0; i < n; ++i) yr[i] = RoundBf16(yr[i]);
    }
  });
}

void NormRows(const std::vector<float>& x, int64_t rows, const Bf16View& w, std::vector<float>* y, ThreadPool* pool) {
  const int64_t n = w.rows;
  y->resize(static_cast<size_t>(rows * n));
  ForRanges(pool, rows, std::max<int64_t>(1, kParallelGrain / n), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) RmsNormRow(&x[r * n], w, n, kVisionNormEps, &(*y)[r * n]);
  });
}

// x = bf16(x + d), REF's residual add of two bf16 tensors.
void AddInPlace(std::vector<float>* x, const std::vector<float>& d, ThreadPool* pool) {
  ForRanges(pool, static_cast<int64_t>(x->size()), kParallelGrain, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) (*x)[i] = RoundBf16((*x)[i] + d[i]);
  });
}

// A bf16 matrix held by the call, viewed as matmul weights (keys, transposed values).
struct OwnedBf16 {
  std::vector<uint16_t> bits;
  Bf16View view;
  void Reset(int64_t rows, int64_t cols) {
    bits.assign(static_cast<size_t>(rows * cols), 0);
    view = Bf16View{};
    view.rows = rows;
    view.cols = cols;
  }
  void Seal() {
    view.p = reinterpret_cast<const uint8_t*>(bits.data());
    view.exponents = Bf16ExponentRange(bits.data(), static_cast<int64_t>(bits.size()));
  }
};

// Full bidirectional attention of one image (REF Attention with F.scaled_dot_product_attention),
// qkv [n, 3 * V] with q and k already rotated -> out [n, V] bf16 values.
void Attend(const ModelConfig& c, const std::vector<float>& qkv, int64_t n, std::vector<float>* out, ThreadPool* pool) {
  const int V = c.vision_dim, H = c.vision_n_heads, hd = c.vision_head_dim();
  const int64_t npad = (n + 31) / 32 * 32;  // P.V's K: zero probabilities past n add nothing
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
  out->assign(static_cast<size_t>(n * V), 0.0f);
  OwnedBf16 keys, values_t;
  std::vector<float> q(static_cast<size_t>(n * hd));
  std::vector<float> s(static_cast<size_t>(kQueryChunk * n)), p(static_cast<size_t>(kQueryChunk * npad), 0.0f);
  std::vector<float> o(static_cast<size_t>(kQueryChunk * hd));
  for (int h = 0; h < H; ++h) {
    keys.Reset(n, hd);
    values_t.Reset(hd, npad);
    ForRanges(pool, n, std::max<int64_t>(1, kParallelGrain / (3 * hd)), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const float* row = &qkv[static_cast<size_t>(r) * 3 * V + static_cast<size_t>(h) * hd];
        std::copy_n(row, hd, &q[static_cast<size_t>(r) * hd]);
        for (int d = 0; d < hd; ++d) {
          keys.bits[static_cast<size_t>(r) * hd + d] = F32ToBf16(row[V + d]);
          values_t.bits[static_cast<size_t>(d) * npad + r] = F32ToBf16(row[2 * V + d]);
        }
      }
    });
    keys.Seal();
    values_t.Seal();
    for (int64_t q0 = 0; q0 < n; q0 += kQueryChunk) {
      const int64_t m = std::min<int64_t>(kQueryChunk, n - q0);
      MatMulBf16(&q[static_cast<size_t>(q0) * hd], m, keys.view, s.data(), pool);  // [m, n]
      ForRanges(pool, m, 1, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
          float* sr = &s[static_cast<size_t>(r) * n];
          ScaleInPlace(sr, n, scale);
          const float mx = *std::max_element(sr, sr + n);
          for (int64_t k = 0; k < n; ++k) sr[k] -= mx;
          ExpFMany(sr, n, sr);
          double l = 0.0;
          for (int64_t k = 0; k < n; ++k) l += sr[k];
          const float lf = static_cast<float>(l);
          float* pr = &p[static_cast<size_t>(r) * npad];
          for (int64_t k = 0; k < n; ++k) pr[k] = RoundBf16(sr[k] / lf);
        }
      });
      MatMulBf16(p.data(), m, values_t.view, o.data(), pool);  // [m, hd]
      for (int64_t r = 0; r < m; ++r)
        for (int d = 0; d < hd; ++d)
          (*out)[static_cast<size_t>(q0 + r) * V + static_cast<size_t>(h) * hd + d] = RoundBf16(o[static_cast<size_t>(r) * hd + d]);
    }
  }
}

}  // namespace

StatusOr<ImageGrid> VisionGrid(const ModelConfig& c, int n_vit_h, int n_vit_w) {
  if (!c.vision) return InvalidArgumentError("image input: this model has no vision tower (vision_config.num_hidden_layers is 0)");
  if (n_vit_h < 1 || n_vit_w < 1)
    return InvalidArgumentError("image input: patch grid " + std::to_string(n_vit_h) + "x" + std::to_string(n_vit_w) +
                                " must be at least 1x1");
  ImageGrid g;
  g.n_vit_h = n_vit_h;
  g.n_vit_w = n_vit_w;
  const int r = c.vision_downsample_ratio;
  g.n_h = (n_vit_h + r - 1) / r;
  g.n_w = (n_vit_w + r - 1) / r;
  if (g.span_length() > c.vision_max_n_token)
    return InvalidArgumentError("image input: patch grid " + std::to_string(n_vit_h) + "x" + std::to_string(n_vit_w) +
                                " gives a " + std::to_string(g.n_h) + "x" + std::to_string(g.n_w) + " token grid, a span of " +
                                std::to_string(g.span_length()) + " positions, over vision_max_n_token = " +
                                std::to_string(c.vision_max_n_token));
  return g;
}

void VisionRopeTable(int n_vit_h, int n_vit_w, int head_dim, double theta, std::vector<float>* cos,
                     std::vector<float>* sin) {
  const int rd = head_dim / 2, nf = rd / 2;
  // inv_freq as REF: fp32 exponents 2i / rd, the power in fp64 rounded to fp32, 1 / it in fp32.
  std::vector<float> inv(nf);
  for (int i = 0; i < nf; ++i) {
    const float expo = static_cast<float>(2 * i) / static_cast<float>(rd);
    inv[i] = 1.0f / static_cast<float>(std::pow(theta, static_cast<double>(expo)));
  }
  const int64_t n = static_cast<int64_t>(n_vit_h) * n_vit_w;
  cos->resize(static_cast<size_t>(n * rd));
  sin->resize(cos->size());
  for (int64_t t = 0; t < n; ++t) {
    const float pos[2] = {static_cast<float>(t / n_vit_w), static_cast<float>(t % n_vit_w)};  // (row, col)
    for (int j = 0; j < rd; ++j) {
      const float angle = pos[j / nf] * inv[j % nf];
      (*cos)[t * rd + j] = static_cast<float>(std::cos(static_cast<double>(angle)));
      (*sin)[t * rd + j] = static_cast<float>(std::sin(static_cast<double>(angle)));
    }
  }
}

void ApplyVisionRope(float* x, int head_dim, const float* cos, const float* sin) {
  const int half = head_dim / 2;
  for (int i = 0; i < half; ++i) {
    const float x1 = x[i], x2 = x[i + half];
    const float a = x1 * cos[i] - x2 * sin[i];
    const float b = x2 * cos[i] + x1 * sin[i];
    x[i] = RoundBf16(a);
    x[i + half] = RoundBf16(b);
  }
}

void AlignerUnfold(const float* x, int n_vit_h, int n_vit_w, int C, int r, float* out) {
  const int n_h = (n_vit_h + r - 1) / r, n_w = (n_vit_w + r - 1) / r;
  const int64_t width = static_cast<int64_t>(C) * r * r;
  for (int bh = 0; bh < n_h; ++bh)
    for (int bw = 0; bw < n_w; ++bw) {
      float* o = out + (static_cast<int64_t>(bh) * n_w + bw) * width;
      for (int ky = 0; ky < r; ++ky)
        for (int kx = 0; kx < r; ++kx) {
          const int y = bh * r + ky, xx = bw * r + kx;
          const bool inside = y < n_vit_h && xx < n_vit_w;  // F.pad's zeros right and bottom
          const float* src = inside ? x + (static_cast<int64_t>(y) * n_vit_w + xx) * C : nullptr;
          for (int ch = 0; ch < C; ++ch) o[static_cast<int64_t>(ch) * r * r + ky * r + kx] = inside ? src[ch] : 0.0f;
        }
    }
}

void VisionTower(const Model& model, const float* patches, int n_vit_h, int n_vit_w, std::vector<float>* out,
                 ThreadPool* pool) {
  const ModelConfig& c = model.config();
  const VisionWeights& vw = model.weights().vision;
  DS41_CHECK(c.vision && !vw.blocks.empty(), "VisionTower without a vision tower");
  const int V = c.vision_dim, I = c.vision_inter_dim, hd = c.vision_head_dim(), H = c.vision_n_heads;
  const int64_t n = static_cast<int64_t>(n_vit_h) * n_vit_w;

  // Patch embedding: 3·p·p inputs are no whole number of 32-wide K blocks; zero-padding inputs and
  // the (small) weight to one keeps the canonical order (zero products add nothing) and the kernel.
  const int K = c.vision_patch_inputs(), Kp = (K + 31) / 32 * 32;
  std::vector<float> xin(static_cast<size_t>(n * Kp), 0.0f);
  for (int64_t t = 0; t < n; ++t) std::copy_n(patches + t * K, K, &xin[static_cast<size_t>(t) * Kp]);
  OwnedBf16 pw;
  pw.Reset(V, Kp);
  for (int o = 0; o < V; ++o)
    for (int k = 0; k < K; ++k) pw.bits[static_cast<size_t>(o) * Kp + k] = LoadU16(vw.patch_w.p + 2 * (static_cast<int64_t>(o) * K + k));
  pw.Seal();
  std::vector<float>& x = *out;  // [n, V]: the residual stream
  x.resize(static_cast<size_t>(n * V));
  LinearBias(xin.data(), n, pw.view, &vw.patch_b, x.data(), pool);

  std::vector<float> cos, sin;
  VisionRopeTable(n_vit_h, n_vit_w, hd, c.vision_rope_theta, &cos, &sin);
  const int rd = hd / 2;
  std::vector<float> h, qkv(static_cast<size_t>(n * 3 * V)), att, y(static_cast<size_t>(n * V));
  std::vector<float> gu(static_cast<size_t>(n * 2 * I)), act(static_cast<size_t>(n * I));
  for (const VisionBlockWeights& b : vw.blocks) {
    // x = x + attn(norm1(x))
    NormRows(x, n, b.norm1, &h, pool);
    LinearBias(h.data(), n, b.wqkv, &b.wqkv_bias, qkv.data(), pool);
    ForRanges(pool, n, std::max<int64_t>(1, kParallelGrain / (2 * V)), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r)
        for (int part = 0; part < 2; ++part)  // q, then k
          for (int hh = 0; hh < H; ++hh)
            ApplyVisionRope(&qkv[static_cast<size_t>(r) * 3 * V + static_cast<size_t>(part) * V + static_cast<size_t>(hh) * hd], hd,
                            &cos[static_cast<size_t>(r) * rd], &sin[static_cast<size_t>(r) * rd]);
    });
    Attend(c, qkv, n, &att, pool);
    LinearBias(att.data(), n, b.wo, &b.wo_bias, y.data(), pool);
    AddInPlace(&x, y, pool);
    // x = x + w2(silu(gate) * up), gate and up the two halves of w1's output
    NormRows(x, n, b.norm2, &h, pool);
    LinearBias(h.data(), n, b.w1, nullptr, gu.data(), pool);
    ForRanges(pool, n, std::max<int64_t>(1, kParallelGrain / I), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const float* g = &gu[static_cast<size_t>(r) * 2 * I];
        for (int i = 0; i < I; ++i) act[static_cast<size_t>(r) * I + i] = RoundBf16(RoundBf16(SiluF(g[i])) * g[I + i]);
      }
    });
    LinearBias(act.data(), n, b.w2, nullptr, y.data(), pool);
    AddInPlace(&x, y, pool);
  }
  std::vector<float> normed;
  NormRows(x, n, vw.norm, &normed, pool);
  x.swap(normed);
}

void VisionAligner(const Model& model, const std::vector<float>& features, const ImageGrid& g, std::vector<float>* out,
                   ThreadPool* pool) {
  const ModelConfig& c = model.config();
  const VisionWeights& vw = model.weights().vision;
  const int D = c.dim, r = c.vision_downsample_ratio;
  const int64_t rows = g.image_rows();
  std::vector<float> merged(static_cast<size_t>(rows * c.vision_aligner_in()));
  AlignerUnfold(features.data(), g.n_vit_h, g.n_vit_w, c.vision_dim, r, merged.data());
  std::vector<float> h(static_cast<size_t>(rows * D));
  LinearBias(merged.data(), rows, vw.aligner_w1, &vw.aligner_b1, h.data(), pool);
  ForRanges(pool, rows * D, kParallelGrain, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {  // F.gelu (exact erf) in fp64, rounded to fp32, then bf16
      const double d = h[i];
      h[i] = RoundBf16(static_cast<float>(0.5 * d * (1.0 + std::erf(d / std::sqrt(2.0)))));
    }
  });
  out->resize(static_cast<size_t>(rows * D));
  LinearBias(h.data(), rows, vw.aligner_w2, &vw.aligner_b2, out->data(), pool);
}

void BuildImageSpan(const VisionWeights& w, int dim, const float* rows, const ImageGrid& g, float* out) {
  auto put = [&](const Bf16View& v, int64_t pos) {
    for (int i = 0; i < dim; ++i) out[pos * dim + i] = v.at(i);
  };
  int64_t pos = 0;
  put(w.image_start, pos++);
  for (int y = 0; y < g.n_h; ++y) {
    std::copy_n(rows + static_cast<int64_t>(y) * g.n_w * dim, static_cast<int64_t>(g.n_w) * dim, out + pos * dim);
    pos += g.n_w;
    put(w.image_newline, pos++);
  }
  put(w.image_end, pos++);
}

double VisionMacs(const ModelConfig& c, const ImageGrid& g) {
  const double n = static_cast<double>(g.patches()), V = c.vision_dim, I = c.vision_inter_dim;
  const double per_block = n * (3 * V * V + V * V + 2 * I * V + I * V)  // wqkv, wo, w1, w2
                           + 2.0 * n * n * V;                          // q.k and p.v over all heads
  const double rows = static_cast<double>(g.image_rows());
  return n * V * c.vision_patch_inputs() + c.vision_n_layers * per_block +
         rows * (static_cast<double>(c.dim) * c.vision_aligner_in() + static_cast<double>(c.dim) * c.dim);
}

}  // namespace ds41
