// The vision tower and aligner (MODEL.md §2.5, §9.2; REF vision.py ViT / Aligner, model.py
// encode_image / merge_image_embeddings): patches of one image -> the rows its span's image
// positions take, and the whole span's embeddings.
//
// Numerics (what tests/oracle/oracle.py mirrors): every nn.Linear is bf16 weights times bf16-valued
// inputs in the canonical 32-wide K blocks (engine/kernels/kernels.h), plus its bias in fp32, one
// rounding to bf16; RMSNorm eps 1e-6 as MODEL.md §3's (fp32 weight math, one rounding); RoPE angles
// and cos/sin in fp32, rotation in fp32, then bf16; attention per head: scores = canonical dot ·
// fp32(1/sqrt(head_dim)), p = bf16(ExpF(s - max) / float(Σ ExpF in fp64)), out = bf16(canonical dot
// of p and v over keys zero-padded to a multiple of 32); silu, GELU (exact erf) in fp64 rounded to
// fp32 then bf16; residual adds rounded to bf16.
//
// Thread-compatible: the functions only read the model; scratch is per call.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/loading/model.h"
#include "util/status.h"

namespace ds41 {

class ThreadPool;

// Token grid of an image of n_vit_h x n_vit_w patches: ceil(n_vit / downsample_ratio) each way.
struct ImageGrid {
  int n_vit_h = 0, n_vit_w = 0;  // patches
  int n_h = 0, n_w = 0;          // aligner rows / columns
  int64_t patches() const { return static_cast<int64_t>(n_vit_h) * n_vit_w; }
  int64_t image_rows() const { return static_cast<int64_t>(n_h) * n_w; }
  // [start] ([image] x n_w [newline]) x n_h [end]
  int64_t span_length() const { return static_cast<int64_t>(n_h) * (n_w + 1) + 2; }
};

// The grid of an n_vit_h x n_vit_w image; InvalidArgument without vision, for a non-positive size,
// or when the span exceeds vision_max_n_token (MODEL.md §9.2: the cap counts the delimiters).
StatusOr<ImageGrid> VisionGrid(const ModelConfig& config, int n_vit_h, int n_vit_w);

// REF get_vision_cos_sin: cos/sin [n_vit_h * n_vit_w, head_dim / 2] for patches in row-major order;
// column i < head_dim / 4 turns by row * inv_freq[i], column head_dim / 4 + i by col * inv_freq[i],
// inv_freq[i] = 1 / theta^(2i / (head_dim / 2)).
void VisionRopeTable(int n_vit_h, int n_vit_w, int head_dim, double theta, std::vector<float>* cos,
                     std::vector<float>* sin);

// Rotate-half over a whole head (REF apply_rotary): x1 = x[:hd/2], x2 = x[hd/2:],
// x <- bf16([x1 cos - x2 sin, x2 cos + x1 sin]).
void ApplyVisionRope(float* x, int head_dim, const float* cos, const float* sin);

// REF Aligner's merge: features [n_vit_h * n_vit_w, C] viewed as [n_vit_h, n_vit_w, C], zero-padded
// right and bottom to multiples of r, then F.unfold(r, stride r): out [n_h * n_w, C * r * r] with
// block (bh, bw) at row bh * n_w + bw and element (c, ky, kx) at column c * r * r + ky * r + kx.
void AlignerUnfold(const float* x, int n_vit_h, int n_vit_w, int C, int r, float* out);

// The tower: patches [n_vit_h * n_vit_w, 3 * p * p] ((c, py, px) order, bf16 values) -> the final
// norm's output [n_vit_h * n_vit_w, vision_dim]. REQUIRES: model has vision; the grid is valid.
void VisionTower(const Model& model, const float* patches, int n_vit_h, int n_vit_w, std::vector<float>* out,
                 ThreadPool* pool);

// The aligner over the tower's output: [grid.image_rows(), dim].
void VisionAligner(const Model& model, const std::vector<float>& features, const ImageGrid& grid,
                   std::vector<float>* out, ThreadPool* pool);

// REF merge_image_embeddings for one span: [span_length, dim] with image_start, then per token row
// the row's n_w aligner rows and image_newline, then image_end. `rows` is [n_h * n_w, dim].
void BuildImageSpan(const VisionWeights& w, int dim, const float* rows, const ImageGrid& grid, float* out);

// Useful multiply-adds of one image through tower and aligner (attention included), for the bench.
double VisionMacs(const ModelConfig& config, const ImageGrid& grid);

}  // namespace ds41
