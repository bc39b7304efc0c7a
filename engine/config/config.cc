#include "engine/config/config.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "util/mapped_file.h"

namespace ds41 {
namespace {

using json = nlohmann::json;

// Reads typed fields of one JSON object, remembering the first error with the key's full name.
class FieldReader {
 public:
  FieldReader(const json& obj, std::string prefix) : obj_(obj), prefix_(std::move(prefix)) {}

  template <typename T>
  void Int(const char* key, T* out, bool required = true) {
    const json* v = Find(key, required);
    if (v == nullptr) return;
    if (!v->is_number_integer()) return Fail(key, "expected an integer");
    *out = v->get<T>();
  }
  void Double(const char* key, double* out, bool required = true) {
    const json* v = Find(key, required);
    if (v == nullptr) return;
    if (!v->is_number()) return Fail(key, "expected a number");
    *out = v->get<double>();
  }
  void Bool(const char* key, bool* out, bool required = true) {
    const json* v = Find(key, required);
    if (v == nullptr) return;
    if (!v->is_boolean()) return Fail(key, "expected true or false");
    *out = v->get<bool>();
  }
  void String(const char* key, std::string* out, bool required = true) {
    const json* v = Find(key, required);
    if (v == nullptr) return;
    if (!v->is_string()) return Fail(key, "expected a string");
    *out = v->get<std::string>();
  }
  template <typename T>
  void IntList(const char* key, std::vector<T>* out, bool required = true) {
    const json* v = Find(key, required);
    if (v == nullptr) return;
    if (!v->is_array()) return Fail(key, "expected a list of integers");
    out->clear();
    for (const json& e : *v) {
      if (!e.is_number_integer()) return Fail(key, "expected a list of integers");
      out->push_back(e.get<T>());
    }
  }
  const json* Object(const char* key, bool required) {
    const json* v = Find(key, required);
    if (v != nullptr && !v->is_object()) {
      Fail(key, "expected an object");
      return nullptr;
    }
    return v;
  }

  const Status& status() const { return status_; }

 private:
  const json* Find(const char* key, bool required) {
    if (!status_.ok()) return nullptr;
    auto it = obj_.find(key);
    if (it == obj_.end() || it->is_null()) {
      if (required) Fail(key, "missing");
      return nullptr;
    }
    return &*it;
  }
  void Fail(const char* key, const char* what) {
    if (status_.ok()) status_ = InvalidArgumentError("config.json: " + prefix_ + key + ": " + what);
  }

  const json& obj_;
  std::string prefix_;
  Status status_;
};

Status Bad(const std::string& msg) { return InvalidArgumentError("config.json: " + msg); }

bool StrictlyIncreasing(const std::vector<int>& v) {
  for (size_t i = 1; i < v.size(); ++i)
    if (v[i] <= v[i - 1]) return false;
  return true;
}

// Largest entry of sorted `ids` that is <= L, or -1.
int LargestAtMost(const std::vector<int>& ids, int L) {
  int best = -1;
  for (int id : ids)
    if (id <= L) best = id;
  return best;
}

}  // namespace

StatusOr<ModelConfig> ModelConfig::FromFile(const std::string& path) {
  DS41_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  auto cfg = FromJson(text);
  if (!cfg.ok()) return cfg.status().Prefixed(path);
  return cfg;
}

StatusOr<ModelConfig> ModelConfig::FromJson(const std::string& json_text) {
  json root = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return Bad("not valid JSON");
  if (!root.is_object()) return Bad("expected a JSON object at the top level");

  ModelConfig c;
  FieldReader top(root, "");
  std::string model_type;
  top.String("model_type", &model_type, /*required=*/false);
  if (!model_type.empty() && model_type != "deepseek_v41")
    return Bad("model_type is \"" + model_type + "\", expected \"deepseek_v41\"");
  top.Int("bos_token_id", &c.bos_token_id, false);
  top.Int("eos_token_id", &c.eos_token_id, false);
  top.Int("pad_token_id", &c.pad_token_id, false);
  top.Int("image_token_id", &c.image_token_id, false);
  const json* q = top.Object("quantization_config", true);
  const json* tc = top.Object("text_config", true);
  const json* vc = top.Object("vision_config", false);
  DS41_RETURN_IF_ERROR(top.status());

  {
    FieldReader r(*q, "quantization_config.");
    std::string method, fmt, expert;
    std::vector<int> block;
    r.String("quant_method", &method);
    r.IntList("weight_block_size", &block);
    r.String("scale_fmt", &fmt);
    r.String("expert_dtype", &expert);
    DS41_RETURN_IF_ERROR(r.status());
    if (method != "fp8") return Bad("quantization_config.quant_method is \"" + method + "\", expected \"fp8\"");
    if (block != std::vector<int>{32, 32}) return Bad("quantization_config.weight_block_size must be [32, 32]");
    if (fmt != "ue8m0") return Bad("quantization_config.scale_fmt is \"" + fmt + "\", expected \"ue8m0\"");
    if (expert != "fp4") return Bad("quantization_config.expert_dtype is \"" + expert + "\", expected \"fp4\"");
  }
  if (vc != nullptr) {
    // HF names of MODEL.md §1.1; absent keys keep REF's ModelArgs defaults.
    FieldReader r(*vc, "vision_config.");
    std::string vtype;
    r.String("model_type", &vtype, false);
    r.Int("num_hidden_layers", &c.vision_n_layers, false);
    r.Int("hidden_size", &c.vision_dim, false);
    r.Int("num_attention_heads", &c.vision_n_heads, false);
    r.Int("intermediate_size", &c.vision_inter_dim, false);
    r.Int("patch_size", &c.vision_patch_size, false);
    r.Double("rope_theta", &c.vision_rope_theta, false);
    r.Int("downsample_ratio", &c.vision_downsample_ratio, false);
    r.Int("max_image_tokens", &c.vision_max_n_token, false);
    r.Int("min_pixels", &c.vision_min_pixels, false);
    r.Double("max_wh_ratio", &c.vision_max_wh_ratio, false);  // null: no limit
    DS41_RETURN_IF_ERROR(r.status());
    if (!vtype.empty() && vtype != "deepseek_v41_vision")
      return Bad("vision_config.model_type is \"" + vtype + "\", expected \"deepseek_v41_vision\"");
  }

  FieldReader r(*tc, "text_config.");
  r.Int("vocab_size", &c.vocab_size);
  r.Int("hidden_size", &c.dim);
  r.Int("moe_intermediate_size", &c.moe_inter_dim);
  r.Int("num_hidden_layers", &c.n_layers);
  r.Int("num_attention_heads", &c.n_heads);
  int kv_heads = 1;
  r.Int("num_key_value_heads", &kv_heads, false);
  r.Int("head_dim", &c.head_dim);
  r.Int("qk_rope_head_dim", &c.rope_head_dim);
  r.Int("q_lora_rank", &c.q_lora_rank);
  r.Int("o_lora_rank", &c.o_lora_rank);
  r.Int("o_groups", &c.o_groups);
  std::string act = "silu";
  r.String("hidden_act", &act, false);
  r.Double("swiglu_limit", &c.swiglu_limit);
  r.Double("rms_norm_eps", &c.norm_eps);
  bool attention_bias = false, tie = false;
  r.Bool("attention_bias", &attention_bias, false);
  r.Bool("tie_word_embeddings", &tie, false);
  r.Int("max_position_embeddings", &c.max_position_embeddings, false);
  r.Double("rope_theta", &c.rope_theta);
  r.Double("compress_rope_theta", &c.compress_rope_theta);
  const json* rs = r.Object("rope_scaling", false);
  r.Int("n_routed_experts", &c.n_routed_experts);
  r.Int("n_shared_experts", &c.n_shared_experts);
  r.Int("num_experts_per_tok", &c.n_activated_experts);
  std::string scoring = "sqrtsoftplus";
  r.String("scoring_func", &scoring, false);
  r.Bool("norm_topk_prob", &c.norm_topk_prob, false);
  r.Double("routed_scaling_factor", &c.route_scale);
  r.Int("sliding_window", &c.window_size);
  r.IntList("compress_ratios", &c.compress_ratios);
  r.IntList("kv_source_layer_ids", &c.kv_source_layers);
  r.IntList("index_source_layer_ids", &c.index_source_layers);
  r.Int("index_n_heads", &c.index_n_heads);
  r.Int("index_head_dim", &c.index_head_dim);
  r.Int("index_topk", &c.index_topk);
  r.Int("candidate_source_layer_id", &c.candidate_source_layer, false);
  r.Int("candidate_topk_blocks", &c.candidate_topk_blocks, false);
  r.Int("candidate_block_size", &c.candidate_block_size, false);
  r.Int("hc_mult", &c.hc_mult);
  r.Int("hc_sinkhorn_iters", &c.hc_sinkhorn_iters);
  r.Double("hc_eps", &c.hc_eps);
  r.IntList("engram_layer_ids", &c.engram_layer_ids, false);
  r.IntList("engram_num_embeddings", &c.engram_num_embeddings, false);
  r.Int("engram_max_ngram_size", &c.engram_max_ngram_size, false);
  r.Int("engram_vocab_size", &c.engram_vocab_size, false);
  r.Int("engram_n_heads", &c.engram_n_heads, false);
  r.Int("engram_head_dim", &c.engram_head_dim, false);
  r.Int("engram_pad_token_id", &c.engram_pad_id, false);
  r.Int("engram_compressed_vocab_size", &c.engram_compressed_vocab_size, false);
  r.Int("num_nextn_predict_layers", &c.n_mtp_layers, false);
  r.Int("dspark_block_size", &c.dspark_block_size, false);
  r.Int("dspark_noise_token_id", &c.dspark_noise_token_id, false);
  r.IntList("dspark_target_layer_ids", &c.dspark_target_layer_ids, false);
  r.Int("dspark_markov_rank", &c.dspark_markov_rank, false);
  r.Int("dspark_n_routed_experts", &c.dspark_n_routed_experts, false);
  r.Int("dspark_num_experts_per_tok", &c.dspark_n_activated_experts, false);
  DS41_RETURN_IF_ERROR(r.status());
  if (rs != nullptr) {
    FieldReader y(*rs, "text_config.rope_scaling.");
    std::string type;
    y.String("rope_type", &type, false);
    if (type.empty()) y.String("type", &type, false);
    y.Double("factor", &c.rope_factor);
    y.Double("beta_fast", &c.beta_fast);
    y.Double("beta_slow", &c.beta_slow);
    y.Int("original_max_position_embeddings", &c.original_seq_len);
    DS41_RETURN_IF_ERROR(y.status());
    if (type != "yarn") return Bad("text_config.rope_scaling.rope_type is \"" + type + "\", expected \"yarn\"");
  }
  if (kv_heads != 1) return Bad("text_config.num_key_value_heads must be 1 (one shared latent KV)");
  if (act != "silu") return Bad("text_config.hidden_act must be \"silu\"");
  if (attention_bias) return Bad("text_config.attention_bias must be false");
  if (tie) return Bad("text_config.tie_word_embeddings must be false");
  if (scoring != "sqrtsoftplus") return Bad("text_config.scoring_func must be \"sqrtsoftplus\"");

  DS41_RETURN_IF_ERROR(c.Validate());
  return c;
}

Status ModelConfig::Validate() {
  auto need = [](bool ok, const std::string& msg) { return ok ? Status::Ok() : Bad(msg); };
  auto multiple = [&](int v, int m, const char* key) {
    return need(v > 0 && v % m == 0, std::string("text_config.") + key + " = " + std::to_string(v) +
                                         " must be a positive multiple of " + std::to_string(m));
  };
  DS41_RETURN_IF_ERROR(need(vocab_size > 0, "text_config.vocab_size must be positive"));
  DS41_RETURN_IF_ERROR(multiple(dim, 32, "hidden_size"));
  DS41_RETURN_IF_ERROR(multiple(moe_inter_dim, 32, "moe_intermediate_size"));
  DS41_RETURN_IF_ERROR(need(n_layers >= 1, "text_config.num_hidden_layers must be at least 1"));
  DS41_RETURN_IF_ERROR(need(n_heads >= 1, "text_config.num_attention_heads must be at least 1"));
  DS41_RETURN_IF_ERROR(multiple(head_dim, 32, "head_dim"));
  DS41_RETURN_IF_ERROR(need(rope_head_dim > 0 && rope_head_dim % 2 == 0 && rope_head_dim <= head_dim,
                            "text_config.qk_rope_head_dim must be even and in (0, head_dim]"));
  DS41_RETURN_IF_ERROR(multiple(q_lora_rank, 32, "q_lora_rank"));
  DS41_RETURN_IF_ERROR(multiple(o_lora_rank, 32, "o_lora_rank"));
  DS41_RETURN_IF_ERROR(need(o_groups >= 1 && n_heads % o_groups == 0,
                            "text_config.o_groups must divide num_attention_heads"));
  DS41_RETURN_IF_ERROR(need(swiglu_limit >= 0.0, "text_config.swiglu_limit must not be negative"));
  DS41_RETURN_IF_ERROR(need(norm_eps >= 0.0, "text_config.rms_norm_eps must not be negative"));
  DS41_RETURN_IF_ERROR(need(rope_theta > 0 && compress_rope_theta > 0, "rope thetas must be positive"));
  DS41_RETURN_IF_ERROR(need(rope_factor >= 1.0, "text_config.rope_scaling.factor must be >= 1"));
  DS41_RETURN_IF_ERROR(need(original_seq_len >= 0, "original_max_position_embeddings must not be negative"));
  DS41_RETURN_IF_ERROR(need(n_routed_experts >= 1, "text_config.n_routed_experts must be at least 1"));
  DS41_RETURN_IF_ERROR(need(n_shared_experts == 1, "text_config.n_shared_experts must be 1"));
  DS41_RETURN_IF_ERROR(need(n_activated_experts >= 1 && n_activated_experts <= n_routed_experts,
                            "text_config.num_experts_per_tok must be in [1, n_routed_experts]"));
  DS41_RETURN_IF_ERROR(need(window_size >= 1, "text_config.sliding_window must be at least 1"));
  DS41_RETURN_IF_ERROR(need(static_cast<int>(compress_ratios.size()) >= n_layers,
                            "text_config.compress_ratios has " + std::to_string(compress_ratios.size()) +
                                " entries, fewer than num_hidden_layers = " + std::to_string(n_layers)));
  for (int L = 0; L < n_layers; ++L)
    DS41_RETURN_IF_ERROR(need(compress_ratios[L] >= 0 && compress_ratios[L] <= 128,
                              "text_config.compress_ratios[" + std::to_string(L) + "] must be in [0, 128]"));
  DS41_RETURN_IF_ERROR(need(hc_mult >= 1, "text_config.hc_mult must be at least 1"));
  DS41_RETURN_IF_ERROR(need(hc_sinkhorn_iters >= 1, "text_config.hc_sinkhorn_iters must be at least 1"));
  DS41_RETURN_IF_ERROR(need(hc_eps >= 0.0, "text_config.hc_eps must not be negative"));
  DS41_RETURN_IF_ERROR(need(n_mtp_layers >= 0, "text_config.num_nextn_predict_layers must not be negative"));
  if (n_mtp_layers > 0) {
    // DSpark (MODEL.md §9.3): ratio-0 draft layers after the backbone, fed by the target layers.
    for (int k = 0; k < n_mtp_layers; ++k) {
      const size_t i = static_cast<size_t>(n_layers + k);
      DS41_RETURN_IF_ERROR(need(i >= compress_ratios.size() || compress_ratios[i] == 0,
                                "text_config.compress_ratios[" + std::to_string(i) + "] (DSpark layer " +
                                    std::to_string(k) + ") must be 0"));
    }
    DS41_RETURN_IF_ERROR(need(dspark_block_size >= 1, "text_config.dspark_block_size must be at least 1 with DSpark layers"));
    DS41_RETURN_IF_ERROR(need(dspark_noise_token_id >= 0 && dspark_noise_token_id < vocab_size,
                              "text_config.dspark_noise_token_id must be a token id"));
    DS41_RETURN_IF_ERROR(need(!dspark_target_layer_ids.empty(), "text_config.dspark_target_layer_ids must not be empty"));
    if (!StrictlyIncreasing(dspark_target_layer_ids))
      return Bad("text_config.dspark_target_layer_ids must be strictly increasing");
    for (int id : dspark_target_layer_ids)
      DS41_RETURN_IF_ERROR(need(id >= 0 && id < n_layers, "text_config.dspark_target_layer_ids names layer " +
                                                              std::to_string(id) + ", out of range"));
    DS41_RETURN_IF_ERROR(multiple(dspark_markov_rank, 32, "dspark_markov_rank"));
    DS41_RETURN_IF_ERROR(need(dspark_n_routed_experts >= 0 && dspark_n_activated_experts >= 0,
                              "text_config.dspark expert counts must not be negative"));
    DS41_RETURN_IF_ERROR(need(dspark_active() >= 1 && dspark_active() <= dspark_experts(),
                              "text_config.dspark_num_experts_per_tok must be in [1, dspark_n_routed_experts]"));
  }

  vision = vision_n_layers > 0;
  DS41_RETURN_IF_ERROR(need(vision_n_layers >= 0, "vision_config.num_hidden_layers must not be negative"));
  if (vision) {
    // The tower's linears and attention products run on the canonical 32-wide K blocks
    // (engine/kernels/kernels.h; the patch embedding's 3·p·p inputs are zero-padded), so widths and
    // head_dim are multiples of 32 (the release's 1024, 2816 and 64 are).
    auto vmultiple = [&](int v, int m, const char* key) {
      return need(v > 0 && v % m == 0, std::string("vision_config.") + key + " = " + std::to_string(v) +
                                           " must be a positive multiple of " + std::to_string(m));
    };
    DS41_RETURN_IF_ERROR(vmultiple(vision_dim, 32, "hidden_size"));
    DS41_RETURN_IF_ERROR(vmultiple(vision_inter_dim, 32, "intermediate_size"));
    DS41_RETURN_IF_ERROR(need(vision_n_heads >= 1 && vision_dim % vision_n_heads == 0 && vision_head_dim() % 32 == 0,
                              "vision_config.num_attention_heads must divide hidden_size into heads of a multiple of 32"));
    // Bounds far above the release's (1024, 2816, 14, 3) so that derived sizes (3·p², dim·r², 2·inter) fit an int.
    DS41_RETURN_IF_ERROR(need(vision_dim <= 65536 && vision_inter_dim <= 262144,
                              "vision_config.hidden_size must be at most 65536 and intermediate_size at most 262144"));
    DS41_RETURN_IF_ERROR(need(vision_patch_size >= 1 && vision_patch_size <= 256, "vision_config.patch_size must be in [1, 256]"));
    DS41_RETURN_IF_ERROR(need(vision_downsample_ratio >= 1 && vision_downsample_ratio <= 16,
                              "vision_config.downsample_ratio must be in [1, 16]"));
    DS41_RETURN_IF_ERROR(need(vision_max_n_token >= 5, "vision_config.max_image_tokens must be at least 5 (one row of one image token)"));
    DS41_RETURN_IF_ERROR(need(vision_min_pixels >= 0, "vision_config.min_pixels must not be negative"));
    DS41_RETURN_IF_ERROR(need(vision_max_wh_ratio >= 0.0, "vision_config.max_wh_ratio must not be negative"));
    DS41_RETURN_IF_ERROR(need(vision_rope_theta > 0.0, "vision_config.rope_theta must be positive"));
    DS41_RETURN_IF_ERROR(need(image_token_id >= 0 && image_token_id < vocab_size, "image_token_id must be a token id with vision"));
  }

  // KV and index sources.
  auto check_sources = [&](const std::vector<int>& ids, const char* key) -> Status {
    if (!StrictlyIncreasing(ids)) return Bad(std::string("text_config.") + key + " must be strictly increasing");
    for (int id : ids) {
      if (id < 0 || id >= n_layers)
        return Bad(std::string("text_config.") + key + " names layer " + std::to_string(id) + ", out of range");
      if (compress_ratios[id] == 0)
        return Bad(std::string("text_config.") + key + " names layer " + std::to_string(id) +
                   ", whose compress ratio is 0");
    }
    return Status::Ok();
  };
  DS41_RETURN_IF_ERROR(check_sources(kv_source_layers, "kv_source_layer_ids"));
  DS41_RETURN_IF_ERROR(check_sources(index_source_layers, "index_source_layer_ids"));
  for (int id : kv_source_layers)
    if (std::find(index_source_layers.begin(), index_source_layers.end(), id) == index_source_layers.end())
      return Bad("kv source layer " + std::to_string(id) + " must also be in index_source_layer_ids");

  bool any_compressed = false;
  roles.assign(n_layers, LayerRole{});
  for (int L = 0; L < n_layers; ++L) {
    LayerRole& role = roles[L];
    role.ratio = compress_ratios[L];
    role.yarn = role.ratio > 0;
    if (role.ratio == 0) continue;
    any_compressed = true;
    role.kv_source = LargestAtMost(kv_source_layers, L);
    role.topk_source = LargestAtMost(index_source_layers, L);
    if (role.kv_source < 0)
      return Bad("layer " + std::to_string(L) + " has compress ratio " + std::to_string(role.ratio) +
                 " but no kv_source_layer_ids entry at or below it");
    if (compress_ratios[role.kv_source] != role.ratio)
      return Bad("layer " + std::to_string(L) + " (ratio " + std::to_string(role.ratio) + ") would read KV of layer " +
                 std::to_string(role.kv_source) + " (ratio " + std::to_string(compress_ratios[role.kv_source]) + ")");
    if (role.topk_source < 0 || LargestAtMost(kv_source_layers, role.topk_source) != role.kv_source)
      return Bad("layer " + std::to_string(L) + " would use top-k of layer " + std::to_string(role.topk_source) +
                 ", which indexes another layer's KV than its own source " + std::to_string(role.kv_source));
    role.kv_slot = static_cast<int>(std::find(kv_source_layers.begin(), kv_source_layers.end(), role.kv_source) -
                                    kv_source_layers.begin());
    role.owns_compressor = role.kv_source == L;
    role.owns_indexer = role.topk_source == L;
    role.mode = role.owns_compressor ? AttnMode::kFull : role.owns_indexer ? AttnMode::kReindex : AttnMode::kReuse;
  }
  if (any_compressed) {
    DS41_RETURN_IF_ERROR(need(index_n_heads >= 1, "text_config.index_n_heads must be at least 1"));
    DS41_RETURN_IF_ERROR(multiple(index_head_dim, 32, "index_head_dim"));
    DS41_RETURN_IF_ERROR(need(rope_head_dim <= index_head_dim, "qk_rope_head_dim must not exceed index_head_dim"));
    DS41_RETURN_IF_ERROR(need(index_topk >= 1, "text_config.index_topk must be at least 1"));
  }
  if (candidate_source_layer >= 0) {
    const int cs = candidate_source_layer;
    if (cs >= n_layers || !roles[cs].owns_indexer)
      return Bad("text_config.candidate_source_layer_id " + std::to_string(cs) + " is not an index source layer");
    DS41_RETURN_IF_ERROR(need(candidate_block_size >= 1, "text_config.candidate_block_size must be at least 1"));
    DS41_RETURN_IF_ERROR(need(candidate_topk_blocks >= 1, "text_config.candidate_topk_blocks must be at least 1"));
    roles[cs].candidate_publisher = true;
    for (int L = cs + 1; L < n_layers; ++L) {
      if (!roles[L].owns_indexer) continue;
      if (roles[L].kv_source != roles[cs].kv_source)
        return Bad("index source " + std::to_string(L) + " would filter by the candidate pool of layer " +
                   std::to_string(cs) + ", which indexes another KV source");
      roles[L].candidate_consumer = true;
    }
  }

  // Engram.
  if (!engram_layer_ids.empty()) {
    if (!StrictlyIncreasing(engram_layer_ids)) return Bad("text_config.engram_layer_ids must be strictly increasing");
    for (int id : engram_layer_ids)
      if (id < 0 || id >= n_layers) return Bad("text_config.engram_layer_ids names layer " + std::to_string(id) + ", out of range");
    DS41_RETURN_IF_ERROR(need(engram_num_embeddings.size() == engram_layer_ids.size(),
                              "text_config.engram_num_embeddings must have one entry per engram layer"));
    DS41_RETURN_IF_ERROR(need(engram_max_ngram_size >= 2, "text_config.engram_max_ngram_size must be at least 2"));
    DS41_RETURN_IF_ERROR(need(engram_n_heads >= 1, "text_config.engram_n_heads must be at least 1"));
    DS41_RETURN_IF_ERROR(multiple(engram_head_dim, 32, "engram_head_dim"));
    DS41_RETURN_IF_ERROR(need(engram_vocab_size >= 2, "text_config.engram_vocab_size must be at least 2"));
    DS41_RETURN_IF_ERROR(need(engram_compressed_vocab_size >= 1,
                              "text_config.engram_compressed_vocab_size must be at least 1"));
    DS41_RETURN_IF_ERROR(need(engram_pad_id >= 0 && engram_pad_id < vocab_size,
                              "text_config.engram_pad_token_id must be a token id"));
    for (size_t i = 0; i < engram_layer_ids.size(); ++i) roles[engram_layer_ids[i]].engram_slot = static_cast<int>(i);
  }

  // CED split: encoder = first half, decoder = second half; the decoder must read only the KV of
  // its first layer, so that layer's compressed KV is a function of the encoder output alone.
  ced_split = n_layers / 2;
  for (int L = 0; L < n_layers; ++L) roles[L].encoder = L < ced_split;
  ced_capable = true;
  ced_problem.clear();
  if (ced_split < 1) {
    ced_capable = false;
    ced_problem = "a single layer has no encoder/decoder split";
  } else if (!roles[ced_split].owns_compressor) {
    ced_capable = false;
    ced_problem = "layer " + std::to_string(ced_split) + " (the first decoder layer) is not a KV source";
  } else {
    for (int L = ced_split; L < n_layers; ++L) {
      if (roles[L].ratio > 0 && roles[L].kv_source != ced_split) {
        ced_capable = false;
        ced_problem = "decoder layer " + std::to_string(L) + " reads KV of layer " + std::to_string(roles[L].kv_source);
        break;
      }
    }
  }
  return Status::Ok();
}

std::string ModelConfig::ToJson() const {
  json t;
  t["model_type"] = "deepseek_v41_text";
  t["vocab_size"] = vocab_size;
  t["hidden_size"] = dim;
  t["moe_intermediate_size"] = moe_inter_dim;
  t["num_hidden_layers"] = n_layers;
  t["num_attention_heads"] = n_heads;
  t["num_key_value_heads"] = 1;
  t["head_dim"] = head_dim;
  t["qk_rope_head_dim"] = rope_head_dim;
  t["q_lora_rank"] = q_lora_rank;
  t["o_lora_rank"] = o_lora_rank;
  t["o_groups"] = o_groups;
  t["hidden_act"] = "silu";
  t["swiglu_limit"] = swiglu_limit;
  t["rms_norm_eps"] = norm_eps;
  t["attention_bias"] = false;
  t["attention_dropout"] = 0.0;
  t["initializer_range"] = 0.02;
  t["use_cache"] = true;
  t["tie_word_embeddings"] = false;
  t["max_position_embeddings"] = max_position_embeddings;
  t["rope_theta"] = rope_theta;
  t["rope_scaling"] = {{"rope_type", "yarn"},
                       {"factor", rope_factor},
                       {"beta_fast", beta_fast},
                       {"beta_slow", beta_slow},
                       {"original_max_position_embeddings", original_seq_len}};
  t["n_routed_experts"] = n_routed_experts;
  t["n_shared_experts"] = n_shared_experts;
  t["num_experts_per_tok"] = n_activated_experts;
  t["scoring_func"] = "sqrtsoftplus";
  t["topk_method"] = "noaux_tc";
  t["norm_topk_prob"] = norm_topk_prob;
  t["routed_scaling_factor"] = route_scale;
  t["sliding_window"] = window_size;
  t["compress_ratios"] = compress_ratios;
  t["compress_rope_theta"] = compress_rope_theta;
  t["kv_source_layer_ids"] = kv_source_layers;
  t["index_source_layer_ids"] = index_source_layers;
  t["index_n_heads"] = index_n_heads;
  t["index_head_dim"] = index_head_dim;
  t["index_topk"] = index_topk;
  t["candidate_source_layer_id"] = candidate_source_layer;
  t["candidate_topk_blocks"] = candidate_topk_blocks;
  t["candidate_block_size"] = candidate_block_size;
  t["hc_mult"] = hc_mult;
  t["hc_sinkhorn_iters"] = hc_sinkhorn_iters;
  t["hc_eps"] = hc_eps;
  t["engram_layer_ids"] = engram_layer_ids;
  t["engram_num_embeddings"] = engram_num_embeddings;
  t["engram_max_ngram_size"] = engram_max_ngram_size;
  t["engram_vocab_size"] = engram_vocab_size;
  t["engram_n_heads"] = engram_n_heads;
  t["engram_head_dim"] = engram_head_dim;
  t["engram_pad_token_id"] = engram_pad_id;
  t["engram_compressed_vocab_size"] = engram_compressed_vocab_size;
  t["num_nextn_predict_layers"] = n_mtp_layers;
  if (n_mtp_layers > 0) {  // only then: configs without DSpark keep their JSON (and fingerprints)
    t["dspark_block_size"] = dspark_block_size;
    t["dspark_noise_token_id"] = dspark_noise_token_id;
    t["dspark_target_layer_ids"] = dspark_target_layer_ids;
    t["dspark_markov_rank"] = dspark_markov_rank;
    t["dspark_n_routed_experts"] = dspark_n_routed_experts;
    t["dspark_num_experts_per_tok"] = dspark_n_activated_experts;
  }

  json root;
  root["architectures"] = {"DeepseekV41ForCausalLM"};
  root["model_type"] = "deepseek_v41";
  root["dtype"] = "bfloat16";
  root["bos_token_id"] = bos_token_id;
  root["eos_token_id"] = eos_token_id;
  root["pad_token_id"] = pad_token_id;
  if (image_token_id >= 0) root["image_token_id"] = image_token_id;
  root["quantization_config"] = {{"quant_method", "fp8"},
                                 {"activation_scheme", "dynamic"},
                                 {"weight_block_size", {32, 32}},
                                 {"scale_fmt", "ue8m0"},
                                 {"expert_dtype", "fp4"}};
  root["text_config"] = t;
  if (vision) {
    json v = {{"model_type", "deepseek_v41_vision"},
              {"num_hidden_layers", vision_n_layers},
              {"hidden_size", vision_dim},
              {"num_attention_heads", vision_n_heads},
              {"intermediate_size", vision_inter_dim},
              {"patch_size", vision_patch_size},
              {"rope_theta", vision_rope_theta},
              {"downsample_ratio", vision_downsample_ratio},
              {"max_image_tokens", vision_max_n_token},
              {"min_pixels", vision_min_pixels}};
    if (vision_max_wh_ratio > 0) v["max_wh_ratio"] = vision_max_wh_ratio;
    else v["max_wh_ratio"] = nullptr;
    root["vision_config"] = v;
  }
  return root.dump(2) + "\n";
}

}  // namespace ds41
