// Typed, non-owning views of the mapped checkpoint, one struct per layer. Every view points into
// the SafetensorsCheckpoint's mappings and is valid while the Model that owns it lives.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/config/config.h"
#include "engine/kernels/numerics.h"
#include "engine/loading/safetensors.h"
#include "engine/loading/weight_tiles.h"
#include "util/status.h"

namespace ds41 {

// BF16 or F32 tensor of `rows` x `cols` (cols = 1 for vectors); raw bytes, possibly unaligned.
struct Bf16View {
  const uint8_t* p = nullptr;
  int64_t rows = 0, cols = 0;
  const uint8_t* tiles = nullptr;  // matmul weights: the same values tile-major, when packed
  ExponentRange exponents;         // matmul weights, when packed: for the VDPBF16PS kernels
  float at(int64_t i) const { return Bf16ToF32(LoadU16(p + 2 * i)); }
  float at(int64_t r, int64_t c) const { return at(r * cols + c); }
  bool present() const { return p != nullptr; }
};
struct F32View {
  const uint8_t* p = nullptr;
  int64_t rows = 0, cols = 0;
  float at(int64_t i) const { return LoadF32(p + 4 * i); }
  float at(int64_t r, int64_t c) const { return at(r * cols + c); }
  bool present() const { return p != nullptr; }
};

// FP8 E4M3 weights [out, in] with one E8M0 scale per 32x32 tile ([ceil(out/32), ceil(in/32)]).
struct Fp8Linear {
  const uint8_t* codes = nullptr;
  const uint8_t* scales = nullptr;
  int64_t out = 0, in = 0;
  const uint8_t* tiles = nullptr;  // the same codes tile-major (engine/loading/weight_tiles.h), when packed
  int64_t scale_cols() const { return (in + 31) / 32; }
  uint8_t scale(int64_t row, int64_t kblock) const { return scales[(row / 32) * scale_cols() + kblock]; }
  // Rows [row0, row0 + n) as a linear of their own (tile-aligned: row0 % 32 == 0).
  Fp8Linear Rows(int64_t row0, int64_t n) const {
    return {codes + row0 * in, scales + (row0 / 32) * scale_cols(), n, in,
            tiles ? tiles + (row0 / kTileRows) * (in / 32) * kFp8TileBytes : nullptr};
  }
};

// MXFP4 weights [out, in]: I8 [out, in/2] (element 2k low nibble), E8M0 [out, in/32].
struct Fp4Linear {
  const uint8_t* packed = nullptr;
  const uint8_t* scales = nullptr;
  int64_t out = 0, in = 0;
  const uint8_t* tiles = nullptr;        // the same codes tile-major (engine/loading/weight_tiles.h), when packed
  const uint8_t* tile_scales = nullptr;  // and the scales, with them
  uint8_t code(int64_t row, int64_t k) const {
    const uint8_t b = packed[row * (in / 2) + k / 2];
    return (k & 1) ? (b >> 4) : (b & 0xF);
  }
  uint8_t scale(int64_t row, int64_t kblock) const { return scales[row * (in / 32) + kblock]; }
};

// FP8 rows [rows, d] with an E8M0 scale per 32 channels of a row (Engram table).
struct Fp8Rows {
  const uint8_t* codes = nullptr;
  const uint8_t* scales = nullptr;
  int64_t rows = 0, dim = 0;
};

struct ExpertWeights {
  Fp4Linear w1, w2, w3;  // gate [inter, D], down [D, inter], up [inter, D]
};

struct LayerWeights {
  Bf16View attn_norm, ffn_norm;
  F32View hc_attn_fn, hc_attn_base, hc_attn_scale;  // [mix, hc*D], [mix], [3]
  F32View hc_ffn_fn, hc_ffn_base, hc_ffn_scale;
  F32View attn_sink;                                // [heads]
  Fp8Linear wq_a, wq_b, wkv, wo_a, wo_b;
  Bf16View q_norm, kv_norm;
  // KV source only.
  Bf16View comp_wkv, comp_wgate, comp_norm;         // wgate only at ratio > 1
  Bf16View idx_wk, idx_k_norm;
  // Index source only.
  Fp8Linear idx_wq_b;
  Bf16View idx_weights_proj;
  // MoE.
  Bf16View gate;                                    // [experts, D]
  F32View gate_bias, gate_bias_vl;                  // bias_vl optional
  std::vector<ExpertWeights> experts;
  Fp8Linear sh_w1, sh_w2, sh_w3;
  // Engram layers only.
  Fp8Rows engram_table;
  Fp8Linear engram_wkv;
  Bf16View engram_q, engram_k;                      // [hc, D]
};

// DSpark draft layers mtp.0.. (MODEL.md §2.5, §9.3): blocks like a ratio-0 backbone layer, plus
// stage 0's projection of the target layers' streams and the last stage's heads.
struct DsparkWeights {
  std::vector<LayerWeights> layers;  // [n_mtp_layers]
  Fp8Linear main_proj;               // mtp.0: [dim, dim * targets]
  Bf16View main_norm;                // mtp.0: [dim]
  Bf16View norm;                     // last stage: [dim]
  Bf16View markov_embed;             // last stage: [vocab, markov_rank]
  Bf16View markov_head;              // last stage: [vocab, markov_rank]
  Bf16View confidence_proj;          // last stage: [1, dim + markov_rank]
};

// Vision tower blocks and aligner (MODEL.md §2.5; REF vision.py), all BF16 [out, in] with biases [out].
struct VisionBlockWeights {
  Bf16View wqkv, wqkv_bias;  // [3*vdim, vdim]: q, k, v chunks
  Bf16View wo, wo_bias;      // [vdim, vdim]
  Bf16View w1;               // [2*inter, vdim]: gate rows, then up rows
  Bf16View w2;               // [vdim, inter]
  Bf16View norm1, norm2;     // [vdim]
};

struct VisionWeights {
  Bf16View patch_w, patch_b;  // [vdim, 3*p*p] (inputs in (c, py, px) order), [vdim]
  std::vector<VisionBlockWeights> blocks;  // [vision_n_layers]
  Bf16View norm;              // [vdim]
  Bf16View aligner_w1, aligner_b1;  // [dim, vdim*r*r], [dim]
  Bf16View aligner_w2, aligner_b2;  // [dim, dim], [dim]
  Bf16View image_start, image_end, image_newline;  // [dim] span delimiters
};

struct ModelWeights {
  Bf16View embed, head, norm;
  std::vector<LayerWeights> layers;
  DsparkWeights dspark;  // empty layers when the config has none
  VisionWeights vision;  // empty blocks (null views) when the config has no vision
};

// Resolves every tensor of the table against the checkpoint. A missing required tensor, a wrong
// dtype or shape, or an unexpected tensor (a misspelt name) is an InvalidArgument naming it.
StatusOr<ModelWeights> BindWeights(const ModelConfig& config, const SafetensorsCheckpoint& ckpt);

}  // namespace ds41
