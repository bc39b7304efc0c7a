// Engine: the entry points every role uses on one Model (STYLE.md §1 "generate"): the exact path
// (MODEL.md §10.5), the CED serving path (§10.6: encoder prefill + CED-source projection, decoder
// replay over the last window positions) and encoder replay (§10.7). Inputs are validated here and
// returned as Status; nothing below this layer sees an unchecked token.
//
// Thread-compatible: an Engine is cheap and stateless beyond its options, which set_* change only
// before use; its calls then only read it and may run at once (the encoder's replays beside its
// scheduler's steps), each on a SequenceState of its own: a SequenceState must not be used by two
// calls at once.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "engine/expert_cache.h"
#include "engine/layers/dspark.h"
#include "engine/layers/forward.h"
#include "engine/loading/model.h"
#include "engine/layers/state.h"
#include "engine/layers/vision.h"
#include "util/status.h"
#include "util/thread_pool.h"

namespace ds41 {

// Tokens of a contiguous range of positions, with optional image-span flags and embeddings. The
// embeddings are those of the flagged rows only, in order, and only from image_embeds_from on: a
// long prompt carries the rows of the images a call computes, not [tokens, dim] (a decoder replaying
// the last window needs no embeddings of the images before it). A call that would compute a
// flagged row before image_embeds_from is refused.
struct TokenSpan {
  std::vector<int32_t> tokens;
  std::vector<uint8_t> image;        // empty, or one flag per token
  std::vector<float> image_embeds;   // empty, or [flagged rows at index >= image_embeds_from, dim]
  int64_t image_embeds_from = 0;     // index (into tokens) of the first row image_embeds may cover

  // Indices [from, to), their flags and the embeddings of their flagged rows that this span has.
  TokenSpan Slice(size_t from, size_t to, int dim) const;
};

// What CED prefill hands to decoder replay (MODEL.md §10.6): the stream entering the first decoder
// layer for the last window positions and the CED source's window KV "where available".
struct EncoderHandoff {
  int64_t h = 0, n = 0;              // positions [h, n) were encoded
  int64_t stream_start = 0;          // x/pre hold positions [stream_start, n)
  std::vector<uint16_t> x;           // [n - stream_start][hc * dim] bf16 bits
  std::vector<float> pre;            // [n - stream_start][hc]
  CedWindow window;                  // layer ced_split window entries
};

// A CED prefill in progress (MODEL.md §10.6 steps 1-2), advanced chunk by chunk; chunks of several
// jobs can share one forward pass (EncodeStep). Chunking changes no bit.
struct EncodeJob {
  SequenceState* state = nullptr;
  TokenSpan span;        // tokens of positions [h, n)
  int64_t h = 0, n = 0;
  int64_t done = 0;      // tokens of `span` encoded so far
  CedWindow window;      // the CED source's window entries kept for decoder replay
  int64_t remaining() const { return n - h - done; }
};

// The handoff's wire form (checked against `config` when parsed; damaged bytes are DataLoss).
std::string SerializeHandoff(const EncoderHandoff& h);
StatusOr<EncoderHandoff> ParseHandoff(const std::string& bytes, const ModelConfig& config);

class Engine {
 public:
  // Kernels run on `pool` (default: the process pool sized by DS41_THREADS or the hardware); the
  // results are bit-identical for any pool size.
  explicit Engine(const Model& model, ThreadPool* pool = &ThreadPool::Default()) : model_(model), pool_(pool) {}

  // Called after each layer of every pass with (layer, first position, rows, stream [rows, hc*dim]).
  using LayerObserver = std::function<void(int layer, int64_t first_pos, int rows, const std::vector<float>& X)>;
  void set_layer_observer(LayerObserver f) { observer_ = std::move(f); }

  // Routed experts through `cache` (null: straight from the mapping). Not owned.
  void set_expert_cache(ExpertCache* cache) { experts_ = cache; }

  // Exact path: all layers over `span` appended at state->length. `logits` gets [rows, vocab] for every
  // row when all_logits, else for the last row only. `dspark_hidden`, when given, gets every row's
  // DSpark input [rows, targets * dim] (what DsparkAppend takes; FailedPrecondition without DSpark).
  Status Prefill(SequenceState* state, const TokenSpan& span, bool all_logits, std::vector<float>* logits,
                 std::vector<float>* dspark_hidden = nullptr);

  // One exact decode step for each sequence (one token each), batched: logits [batch, vocab];
  // `dspark_hidden` as for Prefill, [batch, targets * dim].
  Status DecodeBatch(const std::vector<SequenceState*>& states, const std::vector<int32_t>& tokens,
                     std::vector<float>* logits, std::vector<float>* dspark_hidden = nullptr);

  // Speculative verification (MODEL.md §9.3; the loop REF leaves out): rows[i] = [the token for
  // position length, drafts...] of states[i], 1 to window of them, all sequences in one pass.
  // `logits` gets every row [sum of rows, vocab] (sequence i's rows after those of i - 1),
  // `dspark_hidden` likewise. Each state advances by all its rows; undo[i] is what RollBack
  // (engine/layers/state.h) needs to cut states[i] back to any length the caller accepts. Each row's
  // bits equal those of one-row DecodeBatch steps: per-row results never depend on how a call is cut
  // (engine/layers/forward.h, docs/numerics.md), which is what keeps greedy speculation bit-identical.
  Status VerifyBatch(const std::vector<SequenceState*>& states, const std::vector<std::vector<int32_t>>& rows,
                     std::vector<float>* logits, std::vector<float>* dspark_hidden, std::vector<StateUndo>* undo);

  // DSpark (engine/layers/dspark.h, MODEL.md §9.3). DsparkAppend feeds target positions [start,
  // start + rows) from a pass's `dspark_hidden` to the draft layers' rings (start below the state's
  // end rolls back: what speculation needs after a rejection). DsparkDraft drafts a block for each
  // request in one batched pass; `pick` null: greedy. FailedPrecondition without DSpark layers or
  // with an empty state; InvalidArgument for foreign states, tokens or sizes.
  Status DsparkAppend(DsparkState* state, int64_t start, const std::vector<float>& hidden) const;
  Status DsparkDraft(const std::vector<DraftRequest>& requests, const DraftPicker& pick,
                     std::vector<Draft>* drafts) const;

  // CED step 1-2: encoder layers plus the CED source's projection over `span` = positions [h, n) with
  // h = state->length. The handoff carries the stream for [max(n - window, first kept), n) and the
  // CED source window for [max(n - 2*window + 1, first available), n).
  StatusOr<EncoderHandoff> EncodePrefill(SequenceState* state, const TokenSpan& span);

  // The same in steps: Begin validates and captures the CED window at h; each EncodeStep encodes the
  // next counts[i] tokens of jobs[i] (distinct states) in one forward pass; Finish builds the handoff
  // once a job is done.
  Status BeginEncode(SequenceState* state, TokenSpan span, EncodeJob* job);
  Status EncodeStep(const std::vector<EncodeJob*>& jobs, const std::vector<int64_t>& counts);
  StatusOr<EncoderHandoff> FinishEncode(EncodeJob* job);

  // CED step 3: decoder layers over [replay_start, n) with bounded replay at replay_start for the
  // layers after the CED source (MODEL.md §10.4); `prompt` holds positions [0, n). `logits` gets the
  // logits of position n - 1, or of every replayed position [replay_start, n) when all_rows.
  // `dspark_hidden` gets the DSpark input of the replayed rows (targets must be decoder layers).
  Status DecoderReplay(SequenceState* state, const TokenSpan& prompt, const EncoderHandoff& handoff,
                       int64_t replay_start, std::vector<float>* logits, bool all_rows = false,
                       std::vector<float>* dspark_hidden = nullptr);

  // Encoder replay (MODEL.md §10.7): recompute the encoder layers over [start, h), h = state->length,
  // with bounded replay at start, rebuilding encoder rings, the CED source window, the open compressor
  // groups and the stream ring; global KV of [0, h) must already be in the state.
  Status EncoderReplay(SequenceState* state, const TokenSpan& prompt, int64_t start);

  // Vision (engine/layers/vision.h; REF encode_image): `patches` [n_vit_h * n_vit_w, 3 * p * p] in
  // (c, py, px) order, bf16 values -> the aligner rows [ceil(n_vit_h / r) * ceil(n_vit_w / r), dim]
  // (bf16 values). InvalidArgument without vision, for a null input or an empty grid, or when the
  // image's span would exceed vision_max_n_token. The vector form also checks the input's size.
  StatusOr<std::vector<float>> EncodeImage(const float* patches, int n_vit_h, int n_vit_w) const;
  StatusOr<std::vector<float>> EncodeImage(const std::vector<float>& patches, int n_vit_h, int n_vit_w) const;

  // REF merge_image_embeddings for one image: [start] ([image] x n_w [newline]) x n_h [end] as
  // [span_length, dim] rows for TokenSpan::image_embeds (every position flagged as image).
  // InvalidArgument as EncodeImage, or when `rows` is not [n_h * n_w, dim].
  StatusOr<std::vector<float>> ImageSpanEmbeds(const std::vector<float>& rows, int n_vit_h, int n_vit_w) const;

  // Exact == CED for prompts no longer than the window; the whole CED prefill in one call.
  Status CedPrefill(SequenceState* state, const TokenSpan& prompt_all, int64_t replay_start, std::vector<float>* logits);

 private:
  // The span's shape, and (with embeddings) that every flagged row from `computed_from` on has one.
  Status CheckSpan(const TokenSpan& span, const char* what, int64_t computed_from = 0) const;
  // All layers over rows[i] appended to states[i], every row's logits; `undo` (or null) as VerifyBatch.
  Status Step(const std::vector<SequenceState*>& states, const std::vector<std::vector<int32_t>>& rows,
              std::vector<float>* logits, std::vector<float>* dspark_hidden, std::vector<StateUndo>* undo,
              const char* what);
  std::vector<int64_t> HistoryBefore(const TokenSpan& prompt, int64_t pos) const;
  void Observe(ForwardPass* pass, int64_t first_pos);
  Status CaptureDspark(ForwardPass* pass, int first_layer, std::vector<float>* out, const char* what) const;

  const Model& model_;
  ThreadPool* pool_;
  ExpertCache* experts_ = nullptr;
  LayerObserver observer_;
};

// Default decoder replay start for a prompt of n tokens: max(0, n - window).
int64_t DefaultReplayStart(const ModelConfig& config, int64_t n);

}  // namespace ds41
