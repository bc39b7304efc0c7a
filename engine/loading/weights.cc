#include "engine/loading/weights.h"

#include <set>
#include <unordered_map>

#include "engine/loading/tensor_table.h"

namespace ds41 {
namespace {

std::string Shape(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

struct Bound {
  const TensorSpec* spec = nullptr;
  const uint8_t* data = nullptr;
  const uint8_t* scale = nullptr;
};

}  // namespace

StatusOr<ModelWeights> BindWeights(const ModelConfig& c, const SafetensorsCheckpoint& ckpt) {
  std::unordered_map<std::string, Bound> bound;
  std::vector<TensorSpec> specs;
  ForEachTensor(c, [&](const TensorSpec& s) { specs.push_back(s); });
  std::set<std::string> expected;
  for (const TensorSpec& s : specs) {
    Bound b;
    b.spec = &s;
    bool first = true;
    for (const StoredTensor& st : StoredTensors(s)) {
      expected.insert(st.name);
      const TensorView* v = ckpt.Find(st.name);
      if (v == nullptr) {
        if (!s.required) break;
        return InvalidArgumentError("checkpoint: missing tensor " + st.name + " (expected " +
                                    std::string(DTypeName(st.dtype)) + " " + Shape(st.shape) + ")");
      }
      if (v->dtype != st.dtype || v->shape != st.shape)
        return InvalidArgumentError("checkpoint: tensor " + st.name + ": expected " + std::string(DTypeName(st.dtype)) +
                                    " " + Shape(st.shape) + ", found " + v->Describe() + " in " + v->file);
      (first ? b.data : b.scale) = v->data;
      first = false;
    }
    bound[s.name] = b;
  }
  for (const auto& [name, view] : ckpt.tensors()) {
    if (expected.count(name) || IsIgnoredTensorName(c, name)) continue;
    return InvalidArgumentError("checkpoint: unexpected tensor " + name + " (" + view.Describe() + ") in " + view.file +
                                ": not part of this configuration; misspelt?");
  }

  auto bf16 = [&](const std::string& n) {
    const Bound& b = bound.at(n);
    Bf16View v;
    v.p = b.data;
    v.rows = b.spec->shape[0];
    v.cols = b.spec->shape.size() > 1 ? b.spec->shape[1] : 1;
    return v;
  };
  auto f32 = [&](const std::string& n) {
    const Bound& b = bound.at(n);
    F32View v;
    v.p = b.data;
    v.rows = b.spec->shape[0];
    v.cols = b.spec->shape.size() > 1 ? b.spec->shape[1] : 1;
    return v;
  };
  auto fp8 = [&](const std::string& n) {
    const Bound& b = bound.at(n);
    return Fp8Linear{b.data, b.scale, b.spec->shape[0], b.spec->shape[1]};
  };
  auto fp4 = [&](const std::string& n) {
    const Bound& b = bound.at(n);
    return Fp4Linear{b.data, b.scale, b.spec->shape[0], b.spec->shape[1]};
  };

  ModelWeights w;
  w.embed = bf16("embed.weight");
  w.head = bf16("head.weight");
  w.norm = bf16("norm.weight");
  auto bind_block = [&](const std::string& p, const LayerRole& r, int n_experts, LayerWeights& lw) {
    const std::string a = p + "attn.", f = p + "ffn.";
    lw.attn_norm = bf16(p + "attn_norm.weight");
    lw.ffn_norm = bf16(p + "ffn_norm.weight");
    lw.hc_attn_fn = f32(p + "hc_attn_fn");
    lw.hc_attn_base = f32(p + "hc_attn_base");
    lw.hc_attn_scale = f32(p + "hc_attn_scale");
    lw.hc_ffn_fn = f32(p + "hc_ffn_fn");
    lw.hc_ffn_base = f32(p + "hc_ffn_base");
    lw.hc_ffn_scale = f32(p + "hc_ffn_scale");
    lw.attn_sink = f32(a + "attn_sink");
    lw.wq_a = fp8(a + "wq_a.weight");
    lw.q_norm = bf16(a + "q_norm.weight");
    lw.wq_b = fp8(a + "wq_b.weight");
    lw.wkv = fp8(a + "wkv.weight");
    lw.kv_norm = bf16(a + "kv_norm.weight");
    lw.wo_a = fp8(a + "wo_a.weight");
    lw.wo_b = fp8(a + "wo_b.weight");
    if (r.owns_compressor) {
      lw.comp_wkv = bf16(a + "compressor.wkv.weight");
      if (r.ratio > 1) lw.comp_wgate = bf16(a + "compressor.wgate.weight");
      lw.comp_norm = bf16(a + "compressor.norm.weight");
      lw.idx_wk = bf16(a + "indexer.wk.weight");
      lw.idx_k_norm = bf16(a + "indexer.k_norm.weight");
    }
    if (r.owns_indexer) {
      lw.idx_wq_b = fp8(a + "indexer.wq_b.weight");
      lw.idx_weights_proj = bf16(a + "indexer.weights_proj.weight");
    }
    lw.gate = bf16(f + "gate.weight");
    lw.gate_bias = f32(f + "gate.bias");
    lw.gate_bias_vl = f32(f + "gate.bias_vl");  // p == nullptr when absent
    lw.experts.resize(n_experts);
    for (int e = 0; e < n_experts; ++e) {
      const std::string x = f + "experts." + std::to_string(e) + ".";
      lw.experts[e] = {fp4(x + "w1.weight"), fp4(x + "w2.weight"), fp4(x + "w3.weight")};
    }
    lw.sh_w1 = fp8(f + "shared_experts.w1.weight");
    lw.sh_w2 = fp8(f + "shared_experts.w2.weight");
    lw.sh_w3 = fp8(f + "shared_experts.w3.weight");
    if (r.engram_slot >= 0) {
      const std::string e = p + "engram.";
      const Bound& t = bound.at(e + "embed.weight");
      lw.engram_table = {t.data, t.scale, t.spec->shape[0], t.spec->shape[1]};
      lw.engram_wkv = fp8(e + "wkv.weight");
      lw.engram_q = bf16(e + "q_weight");
      lw.engram_k = bf16(e + "k_weight");
    }
  };
  w.layers.resize(c.n_layers);
  for (int L = 0; L < c.n_layers; ++L)
    bind_block("layers." + std::to_string(L) + ".", c.roles[L], c.n_routed_experts, w.layers[L]);
  DsparkWeights& d = w.dspark;
  d.layers.resize(c.n_mtp_layers);
  for (int k = 0; k < c.n_mtp_layers; ++k) {
    const std::string p = "mtp." + std::to_string(k) + ".";
    bind_block(p, LayerRole{}, c.dspark_experts(), d.layers[k]);
    if (k == 0) {
      d.main_proj = fp8(p + "main_proj.weight");
      d.main_norm = bf16(p + "main_norm.weight");
    }
    if (k == c.n_mtp_layers - 1) {
      d.norm = bf16(p + "norm.weight");
      d.markov_embed = bf16(p + "markov_head.embed.weight");
      d.markov_head = bf16(p + "markov_head.head.weight");
      d.confidence_proj = bf16(p + "confidence_head.proj.weight");
    }
  }
  if (c.vision) {
    VisionWeights& v = w.vision;
    v.patch_w = bf16("vision.patch_embed.proj.weight");
    v.patch_b = bf16("vision.patch_embed.proj.bias");
    v.blocks.resize(c.vision_n_layers);
    for (int b = 0; b < c.vision_n_layers; ++b) {
      const std::string p = "vision.blocks." + std::to_string(b) + ".";
      VisionBlockWeights& vb = v.blocks[b];
      vb.wqkv = bf16(p + "attn.wqkv.weight");
      vb.wqkv_bias = bf16(p + "attn.wqkv.bias");
      vb.wo = bf16(p + "attn.wo.weight");
      vb.wo_bias = bf16(p + "attn.wo.bias");
      vb.w1 = bf16(p + "mlp.w1.weight");
      vb.w2 = bf16(p + "mlp.w2.weight");
      vb.norm1 = bf16(p + "norm1.weight");
      vb.norm2 = bf16(p + "norm2.weight");
    }
    v.norm = bf16("vision.norm.weight");
    v.aligner_w1 = bf16("aligner.w1.weight");
    v.aligner_b1 = bf16("aligner.w1.bias");
    v.aligner_w2 = bf16("aligner.w2.weight");
    v.aligner_b2 = bf16("aligner.w2.bias");
    v.image_start = bf16("image_start");
    v.image_end = bf16("image_end");
    v.image_newline = bf16("image_newline");
  }
  return w;
}

}  // namespace ds41
