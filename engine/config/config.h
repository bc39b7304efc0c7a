// ModelConfig: the checkpoint's shape, parsed from the release's HF config.json (text_config) and
// validated against the layer-role rules of MODEL.md §1.3. Checkpoint parameters only: runtime
// settings (threads, budgets, sampling) live with their owners, never here.
//
// Thread-safe: immutable after Parse().
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "util/status.h"

namespace ds41 {

enum class AttnMode {
  kWindowOnly,  // ratio 0: sliding window only
  kFull,        // KV source: owns the compressor, index keys and an indexer
  kReindex,     // index source that reads another layer's KV
  kReuse,       // reads KV and top-k from earlier layers
};

// What one backbone layer does, derived from the config rules.
struct LayerRole {
  int ratio = 0;              // compress_ratios[L]
  AttnMode mode = AttnMode::kWindowOnly;
  int kv_source = -1;         // layer whose compressed KV and index keys this layer reads (-1: none)
  int topk_source = -1;       // layer whose top-k list this layer uses (-1: none)
  int kv_slot = -1;           // index of kv_source within kv_source_layers
  bool owns_compressor = false;
  bool owns_indexer = false;  // runs its own indexer (index source)
  bool candidate_publisher = false;
  bool candidate_consumer = false;
  bool yarn = false;          // ratio > 0: theta = compress_rope_theta with YaRN
  int engram_slot = -1;       // index in engram_layer_ids, or -1
  bool encoder = false;       // layer < ced_split
};

struct ModelConfig {
  // text_config, HF names in comments where they differ.
  int vocab_size = 0;
  int dim = 0;                 // hidden_size
  int moe_inter_dim = 0;       // moe_intermediate_size
  int n_layers = 0;            // num_hidden_layers
  int n_heads = 0;             // num_attention_heads
  int head_dim = 0;
  int rope_head_dim = 0;       // qk_rope_head_dim
  int q_lora_rank = 0;
  int o_lora_rank = 0;
  int o_groups = 0;
  double swiglu_limit = 0.0;
  double norm_eps = 1e-20;     // rms_norm_eps
  int64_t max_position_embeddings = 0;
  double rope_theta = 10000.0;
  double compress_rope_theta = 160000.0;
  double rope_factor = 1.0;    // rope_scaling.factor
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  int64_t original_seq_len = 0;  // rope_scaling.original_max_position_embeddings
  int n_routed_experts = 0;
  int n_shared_experts = 1;
  int n_activated_experts = 0;  // num_experts_per_tok
  double route_scale = 1.0;     // routed_scaling_factor
  bool norm_topk_prob = true;
  int window_size = 0;          // sliding_window
  std::vector<int> compress_ratios;  // n_layers + n_mtp_layers entries
  std::vector<int> kv_source_layers;
  std::vector<int> index_source_layers;
  int index_n_heads = 0;
  int index_head_dim = 0;
  int index_topk = 0;
  int candidate_source_layer = -1;
  int candidate_topk_blocks = 0;
  int candidate_block_size = 0;
  int hc_mult = 0;
  int hc_sinkhorn_iters = 0;
  double hc_eps = 1e-6;
  std::vector<int> engram_layer_ids;
  std::vector<int64_t> engram_num_embeddings;
  int engram_max_ngram_size = 0;
  int64_t engram_vocab_size = 0;
  int engram_n_heads = 0;
  int engram_head_dim = 0;
  int engram_pad_id = 2;
  int engram_compressed_vocab_size = 0;
  int n_mtp_layers = 0;         // num_nextn_predict_layers: DSpark draft layers (mtp.*), MODEL.md §9.3
  // DSpark (read only when n_mtp_layers > 0).
  int dspark_block_size = 0;            // tokens drafted per pass
  int dspark_noise_token_id = 0;        // fills draft slots 1..block-1
  std::vector<int> dspark_target_layer_ids;  // backbone layers whose input stream feeds stage 0
  int dspark_markov_rank = 256;
  int dspark_n_routed_experts = 0;      // 0: n_routed_experts (REF get_moe_config)
  int dspark_n_activated_experts = 0;   // dspark_num_experts_per_tok; 0: num_experts_per_tok
  int bos_token_id = 0;
  int eos_token_id = 1;
  int pad_token_id = 2;
  int image_token_id = -1;
  // Vision tower (vision_config; REF ModelArgs vision_*, MODEL.md §1.1-1.2, §2.5, §9.2). Read only
  // when vision_n_layers > 0; the defaults are REF's.
  int vision_n_layers = 0;            // num_hidden_layers
  int vision_dim = 1024;              // hidden_size
  int vision_n_heads = 16;            // num_attention_heads
  int vision_inter_dim = 2816;        // intermediate_size (mlp.w1 holds gate and up: 2x this)
  int vision_patch_size = 14;         // patch_size
  int vision_downsample_ratio = 3;    // downsample_ratio: the aligner merges r x r patches
  int vision_max_n_token = 1024;      // max_image_tokens: whole span, delimiters included (§9.2)
  int64_t vision_min_pixels = 544 * 544;  // min_pixels
  double vision_max_wh_ratio = 0.0;   // max_wh_ratio; 0: null (no limit)
  double vision_rope_theta = 10000.0; // rope_theta
  bool vision = false;          // vision_n_layers > 0: the tower's tensors and bias_vl exist

  // Derived by Validate().
  std::vector<LayerRole> roles;  // [n_layers]
  int ced_split = 0;             // first decoder layer (n_layers / 2)
  bool ced_capable = false;      // layer ced_split is a KV source read by every decoder layer
  std::string ced_problem;       // why not, when !ced_capable

  int nope_dim() const { return head_dim - rope_head_dim; }
  int heads_per_group() const { return n_heads / o_groups; }
  int hc_dim() const { return hc_mult * dim; }
  int mix_hc() const { return (2 + hc_mult) * hc_mult; }
  int engram_cols() const { return (engram_max_ngram_size - 1) * engram_n_heads; }
  // Cache entry sizes of MODEL.md §10.3 in bytes.
  int main_kv_bytes() const { return head_dim / 2 + head_dim / 16; }
  int index_key_bytes() const { return index_head_dim / 2 + index_head_dim / 32; }
  int window_entry_bytes() const { return head_dim + head_dim / 32; }
  int num_kv_sources() const { return static_cast<int>(kv_source_layers.size()); }
  // DSpark layers' MoE shape (REF falls back to the backbone's counts when the dspark_* ones are 0).
  int dspark_experts() const { return dspark_n_routed_experts > 0 ? dspark_n_routed_experts : n_routed_experts; }
  int dspark_active() const { return dspark_n_activated_experts > 0 ? dspark_n_activated_experts : n_activated_experts; }
  bool has_dspark() const { return n_mtp_layers > 0; }
  int vision_head_dim() const { return vision_n_heads > 0 ? vision_dim / vision_n_heads : 0; }
  int vision_patch_inputs() const { return 3 * vision_patch_size * vision_patch_size; }  // (c, py, px)
  int vision_aligner_in() const { return vision_dim * vision_downsample_ratio * vision_downsample_ratio; }

  // Parses an HF config.json (top level with text_config) and validates it.
  static StatusOr<ModelConfig> FromJson(const std::string& json_text);
  static StatusOr<ModelConfig> FromFile(const std::string& path);

  // Checks every rule of MODEL.md §1.3 and fills `roles`; the message names the offending key.
  Status Validate();

  // Serializes back to the HF config.json layout (what the checkpoint tool writes).
  std::string ToJson() const;
};

}  // namespace ds41
