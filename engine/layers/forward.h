// ForwardPass: one forward call over a batch of rows, where each row is one position of one
// sequence (MODEL.md §4). Rows come in segments: a segment is a run of consecutive positions of one
// sequence, so a call can be a whole prefill (one segment), a chunk of one, a decode batch (many
// one-row segments) or any mix. Per-token work (linears, mHC, MoE, Engram) runs on the stacked rows;
// attention, compressor and indexer work per segment against its SequenceState.
//
// Every per-row result depends only on the row's position and its sequence state, never on how the
// call was cut, so chunked prefill equals whole prefill bit for bit. Thread-compatible: a pass
// belongs to its caller (it spreads its own work over the pool), and one pass at a time per
// SequenceState.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "engine/expert_cache.h"
#include "engine/kernels/kernels.h"
#include "engine/loading/model.h"
#include "engine/layers/state.h"

namespace ds41 {

// Layer `ced_split`'s window KV for positions [start, start + entries) handed to decoder replay,
// which reads it instead of producing (MODEL.md §10.6 step 3, exact "where available").
struct CedWindow {
  int64_t start = 0;
  std::vector<uint8_t> entries;  // [n][window_entry_bytes]
};

struct Segment {
  SequenceState* state = nullptr;  // null in a DSpark draft pass
  int64_t start = 0;               // position of the first row
  std::vector<int32_t> tokens;     // [n] token ids
  std::vector<uint8_t> image;      // [n] image-span flags (bias_vl, Engram DEAD), or empty
  std::vector<float> image_embeds; // [flagged rows from image_embeds_from, dim], in order, or empty
  int image_embeds_from = 0;       // the engine checked that no earlier flagged row is computed
  // Compressed ids of positions start-1, start-2, ... (Engram look-back); empty: the state's history,
  // which requires start == state->length.
  std::vector<int64_t> history;
  const CedWindow* ced_window = nullptr;  // set by decoder replay
  StateUndo* undo = nullptr;       // set by a verification: compressors and Engram log their rows (BeginUndo)
  int row0 = 0;                    // first row of this segment in the call (set by ForwardPass)
  int n() const { return static_cast<int>(tokens.size()); }
};

class ForwardPass {
 public:
  // `pool` runs the kernels (null: the calling thread); results do not depend on it.
  ForwardPass(const Model& model, std::vector<Segment>* segments, ThreadPool* pool, ExpertCache* experts = nullptr);

  int rows() const { return rows_; }

  // Token embeddings (image rows from image_embeds) copied to every stream copy, pre = one-hot,
  // Engram hashes for every row. Advances each new-token segment's Engram history.
  void Embed();

  // Starts from the stream entering layer `ced_split` instead (decoder replay): per row the bf16
  // stream [hc * dim] and the pre mix [hc]. Segments must carry their Engram history.
  void SetStream(const std::vector<uint16_t>& x, const std::vector<float>& pre);

  // Runs layers [begin, end). Each segment's window ring of a layer must end at the segment's start
  // (or the layer is the CED source with a CedWindow). Records the stream entering layer ced_split in
  // each state's encoder_out ring when layer ced_split - 1 runs.
  void RunLayers(int begin, int end);

  // CED step 2 (MODEL.md §10.6): layer ced_split's window keys, compressed KV and index keys from
  // the current stream (the output of layer ced_split - 1), without running its attention. The
  // window entries of every row are returned in `produced` ([rows][window_entry_bytes]).
  void ProjectCedSource(std::vector<uint8_t>* produced);

  // Final collapse, norm and head for `rows` -> logits [rows.size(), vocab] fp32.
  void Logits(const std::vector<int>& rows, std::vector<float>* out) const;

  // Observer called after each layer with the stream X [rows, hc, dim] (bf16 values).
  std::function<void(int layer, const std::vector<float>& X)> on_layer_done;

  // When set, RunLayers records DSpark's input for every row (MODEL.md §9.3): the mean of the hc
  // copies of the stream entering each dspark_target_layer_ids layer (after its Engram), bf16
  // values, targets side by side -> [rows, targets * dim]. Sized on first use; a target outside the
  // layers run is left as it was. Not owned.
  std::vector<float>* dspark_hidden = nullptr;

  // ---- DSpark draft pass (engine/layers/dspark.cc, MODEL.md §9.3) ----
  // A pass whose segments are draft blocks: segment s holds [last token, noise x (block - 1)] at
  // positions [rings[s]'s end, + block), state null. Embeds them (no Engram), runs the draft layers
  // (each attends its ring of the target's KV and the whole block), then the heads.
  void EmbedDraft();
  void RunDraftLayers(const std::vector<const std::vector<WindowRing>*>& rings);
  // Collapse with the last draft layer's pre -> hidden [rows, dim] (bf16 values) and its normed
  // logits through the shared head [rows, vocab] (fp32, no Markov bias yet).
  void DraftHidden(std::vector<float>* hidden, std::vector<float>* logits) const;

  const std::vector<float>& stream() const { return X_; }
  const std::vector<float>& pre() const { return pre_; }

 private:
  // One sublayer site's mHC coefficients for every row.
  struct Mixes {
    std::vector<float> pre, post, comb;  // [rows, hc], [rows, hc], [rows, hc, hc]
  };
  Mixes HcMixes(const F32View& fn, const F32View& base, const F32View& scale) const;
  // fn(r0, r1) over ranges of [0, rows), spread over the pool; `row_cost` (elements a row touches)
  // sizes the ranges. For row-independent work only, so the result does not depend on the split.
  void ForRows(int64_t rows, int64_t row_cost, const std::function<void(int64_t, int64_t)>& fn) const;
  void Collapse(const std::vector<float>& pre, std::vector<float>* y) const;      // -> [rows, dim]
  void Expand(const std::vector<float>& h, const Mixes& m);                        // X update
  void NormRows(const std::vector<float>& x, const Bf16View& w, std::vector<float>* y) const;

  // X_ and pre_ of every row: the token's embedding (or its image embedding) in every hc copy.
  void EmbedRows();
  void ComputeEngramRows();
  void EngramBlock(int layer);
  void RecordDsparkHidden(int slot);
  void Attention(int layer, const std::vector<float>& x, std::vector<float>* out);
  // Query path (§6.1) of every row: cq [rows, q_lora_rank], q_ [rows, heads, head_dim] with RoPE at
  // the row's position; the angles are left in cs/sn [rows, rope_head_dim / 2].
  void QueryPath(const LayerWeights& w, const RopeTable& rope, const std::vector<float>& x, std::vector<float>* cq,
                 std::vector<float>* cs, std::vector<float>* sn);
  // Runs attend(r, o) for every row, o = its [heads, head_dim] of o_, then de-rotates the output's
  // rope dims at the row's position (cs/sn: QueryPath's angles).
  void AttendRows(const std::vector<float>& cs, const std::vector<float>& sn,
                  const std::function<void(int64_t row, float* o)>& attend);
  // The grouped low-rank output projection (§6.9) of the de-rotated o_ -> out [rows, dim].
  void OutputProjection(const LayerWeights& w, std::vector<float>* out);
  // KV production of one layer for every row: window entries, and for a KV source the compressor.
  void ProduceWindowEntries(int layer, const std::vector<float>& x, std::vector<uint8_t>* entries) const;
  void DraftAttention(int k, const std::vector<const std::vector<WindowRing>*>& rings, const std::vector<float>& x,
                      std::vector<float>* out);
  void Compress(int layer, const std::vector<float>& x);
  void Index(int layer, const std::vector<float>& x, const std::vector<float>& cq);
  void AttendRow(int layer, const Segment& seg, int row, const float* q, const std::vector<uint8_t>& new_window,
                 float* o) const;
  void CommitWindow(int layer, const std::vector<uint8_t>& new_window);
  void Moe(int layer, const std::vector<float>& x, std::vector<float>* out) const;
  // The MoE of one block's weights with `active` of its experts per row; `cache_layer` names the
  // block to the expert cache (-1: read the mapping).
  void MoeOf(const LayerWeights& w, int active, int cache_layer, const std::vector<float>& x,
             std::vector<float>* out) const;
  void RecordEncoderOutput();

  // Window KV entry of position p for segment `seg` at `layer`, from the call's new entries, the
  // CED window or the ring; nullptr when absent.
  const uint8_t* WindowEntry(int layer, const Segment& seg, int64_t p, const std::vector<uint8_t>& new_window) const;

  const Model& model_;
  const ModelConfig& c_;
  std::vector<Segment>& segs_;
  int rows_ = 0;
  std::vector<int64_t> pos_;        // [rows]
  std::vector<int> seg_of_row_;     // [rows]
  std::vector<int> dspark_slot_;    // [n_layers]: index in dspark_target_layer_ids, or -1
  std::vector<uint8_t> image_;      // [rows]
  std::vector<int64_t> engram_rows_;  // [rows, engram layers, cols]
  std::vector<float> X_;            // [rows, hc, dim] bf16 values
  std::vector<float> pre_;          // [rows, hc]
  // The shared attention runtime of the call (REF's shared_attn): top-k picks of the latest index
  // source and the candidate pool of the publisher, per row.
  std::vector<std::vector<int32_t>> topk_;       // [rows][picks], ascending positions
  std::vector<std::vector<uint8_t>> candidates_; // [rows][blocks] kept flags of the candidate pool
  ThreadPool* pool_;
  ExpertCache* experts_;
  mutable QuantActs qa_;
  std::vector<float> q_, o_;  // attention's queries and outputs [rows, heads, head_dim], kept across layers
};

// Sinkhorn split of one row's 24 (for hc = 4) mixes into pre, post and the doubly stochastic comb
// (MODEL.md §5). Exposed for tests.
void SplitSinkhorn(const float* mixes, const float* scale, const float* base, int hc, int iters, float eps,
                   float* pre, float* post, float* comb);

// y [rows, w.rows] = RMSNorm of each row of x with weight w, rows spread over `pool`.
void RmsNormRows(const float* x, int64_t rows, const Bf16View& w, float eps, float* y, ThreadPool* pool);

// FP8 window KV entries (MODEL.md §6.3, §10.3) of `rows` inputs x [rows, dim] at positions pos:
// QDQ8(rope(RMSNorm_kv(Lin8(wkv, x)))) -> entries [rows][window_entry_bytes].
void ProduceWindowKv(const ModelConfig& c, const LayerWeights& w, const RopeTable& rope, const float* x, int64_t rows,
                     const int64_t* pos, uint8_t* entries, QuantActs* qa, ThreadPool* pool);

// Sparse attention of one query row (every head) over a key list (MODEL.md §6.9): keys
// [nkeys, head_dim] with their slot in the list (online softmax over blocks of 64 slots), the sink
// in the denominator -> o [heads, head_dim] (bf16 values, not yet de-rotated).
void AttendKeyList(const float* q, int heads, int head_dim, const float* keys, const int* slot, int nkeys,
                   const F32View& sink, float* o);

// Dequantizes cache entries (MODEL.md §10.3) to bf16-valued floats.
void DecodeWindowEntry(const uint8_t* e, int head_dim, float* out);
void DecodeMainKv(const uint8_t* e, int head_dim, float* out);
void DecodeIndexKey(const uint8_t* e, int index_head_dim, float* out);

}  // namespace ds41
