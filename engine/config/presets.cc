#include "engine/config/presets.h"

#include "util/check.h"

namespace ds41 {

ModelConfig ReleaseConfig() {
  ModelConfig c;
  c.vocab_size = 129280;
  c.dim = 5120;
  c.moe_inter_dim = 2304;
  c.n_layers = 40;
  c.n_heads = 64;
  c.head_dim = 512;
  c.rope_head_dim = 64;
  c.q_lora_rank = 1280;
  c.o_lora_rank = 1024;
  c.o_groups = 8;
  c.swiglu_limit = 10.0;
  c.norm_eps = 1e-20;
  c.max_position_embeddings = 1048576;
  c.rope_theta = 10000;
  c.compress_rope_theta = 160000;
  c.rope_factor = 16;
  c.beta_fast = 32;
  c.beta_slow = 1;
  c.original_seq_len = 65536;
  c.n_routed_experts = 384;
  c.n_shared_experts = 1;
  c.n_activated_experts = 6;
  c.route_scale = 1.5;
  c.window_size = 128;
  c.compress_ratios = {0, 0};
  for (int i = 0; i < 18; ++i) c.compress_ratios.push_back(2);
  for (int i = 0; i < 20; ++i) c.compress_ratios.push_back(1);
  for (int i = 0; i < 3; ++i) c.compress_ratios.push_back(0);
  c.kv_source_layers = {2, 8, 14, 20};
  c.index_source_layers = {2, 8, 14, 20, 24, 28, 32, 36};
  c.index_n_heads = 32;
  c.index_head_dim = 128;
  c.index_topk = 512;
  c.candidate_source_layer = 20;
  c.candidate_topk_blocks = 2048;
  c.candidate_block_size = 8;
  c.hc_mult = 4;
  c.hc_sinkhorn_iters = 20;
  c.hc_eps = 1e-6;
  c.engram_layer_ids = {1, 14};
  c.engram_num_embeddings = {384006168, 384016682};
  c.engram_max_ngram_size = 4;
  c.engram_vocab_size = 16000000;
  c.engram_n_heads = 8;
  c.engram_head_dim = 256;
  c.engram_pad_id = 2;
  c.engram_compressed_vocab_size = 99092;
  c.n_mtp_layers = 3;
  c.dspark_block_size = 5;
  c.dspark_noise_token_id = 128799;
  c.dspark_target_layer_ids = {37, 38, 39};
  c.dspark_markov_rank = 256;
  c.dspark_n_routed_experts = 128;
  c.dspark_n_activated_experts = 3;
  c.image_token_id = 129264;
  c.vision_n_layers = 32;
  c.vision_dim = 1024;
  c.vision_n_heads = 16;
  c.vision_inter_dim = 2816;
  c.vision_patch_size = 14;
  c.vision_downsample_ratio = 3;
  c.vision_max_n_token = 1024;
  c.vision_min_pixels = 295936;
  c.vision_max_wh_ratio = 0.0;  // null
  c.vision_rope_theta = 10000;
  Status s = c.Validate();
  DS41_CHECK(s.ok(), s.ToString());
  return c;
}

ModelConfig TinyConfig() {
  ModelConfig c;
  c.vocab_size = 512;
  c.dim = 256;
  c.moe_inter_dim = 128;
  c.n_layers = 8;
  c.n_heads = 4;
  c.head_dim = 128;
  c.rope_head_dim = 64;
  c.q_lora_rank = 64;
  c.o_lora_rank = 64;
  c.o_groups = 2;
  c.swiglu_limit = 10.0;
  c.norm_eps = 1e-20;
  c.max_position_embeddings = 1048576;
  c.rope_theta = 10000;
  c.compress_rope_theta = 160000;
  c.rope_factor = 16;
  c.beta_fast = 32;
  c.beta_slow = 1;
  c.original_seq_len = 65536;
  c.n_routed_experts = 8;
  c.n_shared_experts = 1;
  c.n_activated_experts = 2;
  c.route_scale = 1.5;
  c.window_size = 16;
  c.compress_ratios = {0, 2, 2, 2, 1, 1, 1, 1};
  c.kv_source_layers = {1, 3, 4};
  c.index_source_layers = {1, 3, 4, 6};
  c.index_n_heads = 4;
  c.index_head_dim = 64;
  c.index_topk = 8;
  c.candidate_source_layer = 4;
  c.candidate_topk_blocks = 8;
  c.candidate_block_size = 4;
  c.hc_mult = 4;
  c.hc_sinkhorn_iters = 20;
  c.hc_eps = 1e-6;
  c.engram_layer_ids = {1, 3};
  c.engram_num_embeddings = {6126, 6332};
  c.engram_max_ngram_size = 4;
  c.engram_vocab_size = 1000;
  c.engram_n_heads = 2;
  c.engram_head_dim = 32;
  c.engram_pad_id = 2;
  c.engram_compressed_vocab_size = 256;
  c.n_mtp_layers = 0;
  c.vision_n_layers = 0;
  Status s = c.Validate();
  DS41_CHECK(s.ok(), s.ToString());
  return c;
}

ModelConfig SmallConfig() {
  ModelConfig c = TinyConfig();
  // The release's attention arithmetic (window, top-k, candidate pool) so replay spans and
  // placement costs are the real ones; a vocabulary large enough for a trained BPE tokenizer.
  const ModelConfig r = ReleaseConfig();
  c.vocab_size = 4096;
  c.window_size = r.window_size;
  c.index_topk = r.index_topk;
  c.candidate_topk_blocks = r.candidate_topk_blocks;
  c.candidate_block_size = r.candidate_block_size;
  Status s = c.Validate();
  DS41_CHECK(s.ok(), s.ToString());
  return c;
}

ModelConfig TinyDsparkConfig() {
  ModelConfig c = TinyConfig();
  // The release's DSpark shape at tiny width: three draft layers over the last three backbone
  // layers (as 37-39 of 40), a block of 5, top-3 of a smaller expert set than the backbone's.
  c.n_mtp_layers = 3;
  c.compress_ratios.insert(c.compress_ratios.end(), {0, 0, 0});
  c.dspark_block_size = 5;
  c.dspark_noise_token_id = 500;
  c.dspark_target_layer_ids = {5, 6, 7};
  c.dspark_markov_rank = 64;
  c.dspark_n_routed_experts = 4;
  c.dspark_n_activated_experts = 3;
  Status s = c.Validate();
  DS41_CHECK(s.ok(), s.ToString());
  return c;
}

ModelConfig TinyVisionConfig() {
  ModelConfig c = TinyConfig();
  // A two-block tower at toy width with the release's structure: 2 heads of 32 (rope over 16 = 8 h and
  // 8 w frequencies), patch 4 (48 inputs: a partial K block), 3x3 merge, and a span cap that a 12x12
  // patch grid (4x4 tokens: 22 positions) fits and a 13x13 one (5x5: 32) does not.
  c.image_token_id = 509;
  c.vision_n_layers = 2;
  c.vision_dim = 64;
  c.vision_n_heads = 2;
  c.vision_inter_dim = 96;
  c.vision_patch_size = 4;
  c.vision_downsample_ratio = 3;
  c.vision_max_n_token = 30;
  c.vision_min_pixels = 16 * 16;
  c.vision_max_wh_ratio = 0.0;
  c.vision_rope_theta = 10000;
  Status s = c.Validate();
  DS41_CHECK(s.ok(), s.ToString());
  return c;
}

std::vector<std::string> PresetNames() { return {"release", "small", "tiny", "tiny-dspark", "tiny-vision"}; }

StatusOr<ModelConfig> PresetConfig(const std::string& name) {
  if (name == "release") return ReleaseConfig();
  if (name == "tiny") return TinyConfig();
  if (name == "small") return SmallConfig();
  if (name == "tiny-dspark") return TinyDsparkConfig();
  if (name == "tiny-vision") return TinyVisionConfig();
  return NotFoundError("unknown preset \"" + name + "\" (known: release, small, tiny, tiny-dspark, tiny-vision)");
}

}  // namespace ds41
