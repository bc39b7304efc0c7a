#include "engine/loading/tensor_table.h"

namespace ds41 {

std::string ScaleName(const std::string& weight_name) {
  static const std::string kSuffix = ".weight";
  if (weight_name.size() >= kSuffix.size() &&
      weight_name.compare(weight_name.size() - kSuffix.size(), kSuffix.size(), kSuffix) == 0)
    return weight_name.substr(0, weight_name.size() - kSuffix.size()) + ".scale";
  return weight_name + ".scale";
}

std::vector<StoredTensor> StoredTensors(const TensorSpec& s) {
  auto ceil32 = [](int64_t v) { return (v + 31) / 32; };
  switch (s.format) {
    case TensorFormat::kBf16: return {{s.name, DType::kBF16, s.shape}};
    case TensorFormat::kF32: return {{s.name, DType::kF32, s.shape}};
    case TensorFormat::kFp8Linear:
      return {{s.name, DType::kF8E4M3, s.shape},
              {ScaleName(s.name), DType::kF8E8M0, {ceil32(s.shape[0]), ceil32(s.shape[1])}}};
    case TensorFormat::kFp4Linear:
      return {{s.name, DType::kI8, {s.shape[0], s.shape[1] / 2}},
              {ScaleName(s.name), DType::kF8E8M0, {s.shape[0], s.shape[1] / 32}}};
    case TensorFormat::kFp8Rows:
      return {{s.name, DType::kF8E4M3, s.shape}, {ScaleName(s.name), DType::kF8E8M0, {s.shape[0], s.shape[1] / 32}}};
  }
  return {};
}

bool IsIgnoredTensorName(const ModelConfig& c, const std::string& n) {
  // DSpark tensors are read whenever the configuration has DSpark layers (then the table lists them).
  if (c.n_mtp_layers == 0 && n.rfind("mtp.", 0) == 0) return true;
  // Likewise the vision tower's whenever the configuration has one.
  if (c.vision) return false;
  for (const char* p : {"vision.", "aligner.", "image_start", "image_end", "image_newline"})
    if (n.rfind(p, 0) == 0) return true;
  return false;
}

void ForEachTensor(const ModelConfig& c, const std::function<void(const TensorSpec&)>& fn) {
  using F = TensorFormat;
  using H = InitHint;
  const int64_t D = c.dim;
  auto emit = [&](std::string name, F f, std::vector<int64_t> shape, H init, bool required = true) {
    fn(TensorSpec{std::move(name), f, std::move(shape), required, init});
  };
  auto norm = [&](std::string name, int64_t n, double mean) { emit(std::move(name), F::kBf16, {n}, {H::kNorm, mean}); };
  auto proj = [&](std::string name, F f, int64_t out, int64_t in, double gain) {
    emit(std::move(name), f, {out, in}, {H::kProjection, gain});
  };

  emit("embed.weight", F::kBf16, {c.vocab_size, D}, {H::kEmbedding, 0.12});
  emit("head.weight", F::kBf16, {c.vocab_size, D}, {H::kProjection, 1.0});
  norm("norm.weight", D, 1.0);

  const int64_t hcd = c.hc_dim(), mix = c.mix_hc();
  // One block: attention, mHC, MoE (and Engram); DSpark layers are ratio-0 blocks with their own
  // expert count (MODEL.md §2.5).
  auto block = [&](const std::string& p, const LayerRole& r, int n_experts) {
    norm(p + "attn_norm.weight", D, 0.025);
    norm(p + "ffn_norm.weight", D, 0.2);
    for (const char* site : {"attn", "ffn"}) {
      const std::string s = p + "hc_" + site;
      emit(s + "_fn", F::kF32, {mix, hcd}, {H::kProjection, 1.0});
      emit(s + "_base", F::kF32, {mix}, {H::kSmall, 0.5});
      emit(s + "_scale", F::kF32, {3}, {H::kSmall, 0.5});
    }
    const std::string a = p + "attn.";
    emit(a + "attn_sink", F::kF32, {c.n_heads}, {H::kSmall, 0.5});
    proj(a + "wq_a.weight", F::kFp8Linear, c.q_lora_rank, D, 1.6);
    norm(a + "q_norm.weight", c.q_lora_rank, 0.97);
    proj(a + "wq_b.weight", F::kFp8Linear, int64_t{c.n_heads} * c.head_dim, c.q_lora_rank, 0.95);
    proj(a + "wkv.weight", F::kFp8Linear, c.head_dim, D, 1.8);
    norm(a + "kv_norm.weight", c.head_dim, 0.4);
    proj(a + "wo_a.weight", F::kFp8Linear, int64_t{c.o_groups} * c.o_lora_rank,
         int64_t{c.heads_per_group()} * c.head_dim, 1.6);
    proj(a + "wo_b.weight", F::kFp8Linear, D, int64_t{c.o_groups} * c.o_lora_rank, 1.9);
    if (r.owns_compressor) {
      proj(a + "compressor.wkv.weight", F::kBf16, c.head_dim, D, 1.0);
      if (r.ratio > 1) proj(a + "compressor.wgate.weight", F::kBf16, c.head_dim, D, 1.0);
      norm(a + "compressor.norm.weight", c.head_dim, 0.6);
      proj(a + "indexer.wk.weight", F::kBf16, c.index_head_dim, c.head_dim, 1.0);
      norm(a + "indexer.k_norm.weight", c.index_head_dim, 0.5);
    }
    if (r.owns_indexer) {
      proj(a + "indexer.wq_b.weight", F::kFp8Linear, int64_t{c.index_n_heads} * c.index_head_dim, c.q_lora_rank, 1.0);
      proj(a + "indexer.weights_proj.weight", F::kBf16, c.index_n_heads, D, 1.0);
    }
    const std::string f = p + "ffn.";
    proj(f + "gate.weight", F::kBf16, n_experts, D, 2.9);
    emit(f + "gate.bias", F::kF32, {n_experts}, {H::kRouterBias, 0.5});
    emit(f + "gate.bias_vl", F::kF32, {n_experts}, {H::kRouterBias, 0.5}, /*required=*/c.vision);
    for (int e = 0; e < n_experts; ++e) {
      const std::string x = f + "experts." + std::to_string(e) + ".";
      proj(x + "w1.weight", F::kFp4Linear, c.moe_inter_dim, D, 1.5);
      proj(x + "w2.weight", F::kFp4Linear, D, c.moe_inter_dim, 1.05);
      proj(x + "w3.weight", F::kFp4Linear, c.moe_inter_dim, D, 1.5);
    }
    proj(f + "shared_experts.w1.weight", F::kFp8Linear, c.moe_inter_dim, D, 1.5);
    proj(f + "shared_experts.w2.weight", F::kFp8Linear, D, c.moe_inter_dim, 1.05);
    proj(f + "shared_experts.w3.weight", F::kFp8Linear, c.moe_inter_dim, D, 1.5);
    if (r.engram_slot >= 0) {
      const std::string e = p + "engram.";
      emit(e + "embed.weight", F::kFp8Rows, {c.engram_num_embeddings[r.engram_slot], c.engram_head_dim},
           {H::kEngramTable, 0.1});
      proj(e + "wkv.weight", F::kFp8Linear, D * (c.hc_mult + 1), int64_t{c.engram_cols()} * c.engram_head_dim, 1.0);
      emit(e + "q_weight", F::kBf16, {c.hc_mult, D}, {H::kNorm, 1.0});
      emit(e + "k_weight", F::kBf16, {c.hc_mult, D}, {H::kNorm, 1.0});
    }
  };
  for (int L = 0; L < c.n_layers; ++L) block("layers." + std::to_string(L) + ".", c.roles[L], c.n_routed_experts);

  // DSpark draft layers (MODEL.md §2.5, §9.3): stage 0 projects the target layers' streams, the last
  // stage carries the final norm, the Markov head and the confidence head.
  const LayerRole draft_role;  // ratio 0: window attention only, no Engram
  for (int k = 0; k < c.n_mtp_layers; ++k) {
    const std::string p = "mtp." + std::to_string(k) + ".";
    block(p, draft_role, c.dspark_experts());
    if (k == 0) {
      proj(p + "main_proj.weight", F::kFp8Linear, D, D * static_cast<int64_t>(c.dspark_target_layer_ids.size()), 1.0);
      norm(p + "main_norm.weight", D, 1.0);
    }
    if (k == c.n_mtp_layers - 1) {
      norm(p + "norm.weight", D, 1.0);
      emit(p + "markov_head.embed.weight", F::kBf16, {c.vocab_size, c.dspark_markov_rank}, {H::kEmbedding, 0.12});
      proj(p + "markov_head.head.weight", F::kBf16, c.vocab_size, c.dspark_markov_rank, 1.0);
      proj(p + "confidence_head.proj.weight", F::kBf16, 1, D + c.dspark_markov_rank, 1.0);
    }
  }

  // Vision tower and aligner (MODEL.md §2.5), all BF16, after everything else so that configurations
  // without vision list (and pack) exactly what they did before.
  if (!c.vision) return;
  const int64_t V = c.vision_dim, I = c.vision_inter_dim;
  auto bias = [&](std::string name, int64_t n) { emit(std::move(name), F::kBf16, {n}, {H::kSmall, 0.02}); };
  proj("vision.patch_embed.proj.weight", F::kBf16, V, c.vision_patch_inputs(), 1.0);
  bias("vision.patch_embed.proj.bias", V);
  for (int b = 0; b < c.vision_n_layers; ++b) {
    const std::string p = "vision.blocks." + std::to_string(b) + ".";
    proj(p + "attn.wqkv.weight", F::kBf16, 3 * V, V, 1.0);
    bias(p + "attn.wqkv.bias", 3 * V);
    proj(p + "attn.wo.weight", F::kBf16, V, V, 1.0);
    bias(p + "attn.wo.bias", V);
    proj(p + "mlp.w1.weight", F::kBf16, 2 * I, V, 1.0);  // [gate; up] chunks (REF MLP)
    proj(p + "mlp.w2.weight", F::kBf16, V, I, 1.0);
    norm(p + "norm1.weight", V, 1.0);
    norm(p + "norm2.weight", V, 1.0);
  }
  norm("vision.norm.weight", V, 1.0);
  proj("aligner.w1.weight", F::kBf16, D, c.vision_aligner_in(), 1.0);
  bias("aligner.w1.bias", D);
  proj("aligner.w2.weight", F::kBf16, D, D, 1.0);
  bias("aligner.w2.bias", D);
  for (const char* n : {"image_start", "image_end", "image_newline"}) emit(n, F::kBf16, {D}, {H::kEmbedding, 0.12});
}

}  // namespace ds41
