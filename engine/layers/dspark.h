// DSpark, the release's draft model (MODEL.md §9.3, §2.5; REF DSparkBlock / forward_spec): three
// ratio-0 blocks (mtp.0..2) that draft `dspark_block_size` tokens from the target's state.
//
// The target side: every backbone pass can record, per row, the mean of the hc copies of the stream
// entering each dspark_target_layer_ids layer (ForwardPass::dspark_hidden, Engine's `dspark_hidden`
// outputs). DsparkAppend turns those rows into stage 0's main_x = RMSNorm(main_proj · hidden) and
// each draft layer's FP8 window entry of main_x at the target position (the draft layers' window
// rings, REF's window_kv_cache of the mtp blocks).
//
// The draft side: after the target has processed positions [.., e) (e = the state's end) and picked
// the token `last` for position e, DsparkPropose runs the block [last, noise x (block - 1)] at
// positions [e, e + block): each draft layer attends its ring (slot order, as REF lists it) and the
// whole block (bidirectional), 128-expert MoE with the text routing bias; then the collapse, the
// last stage's norm and the shared head give logits per slot, slot i gets the Markov head's bias
// for the token before it (slot 0: `last`; slot i > 0: slot i - 1's pick) and the confidence head
// reads [hidden, markov embedding]. Slot i's pick is the draft of position e + i + 1.
//
// So one decode step of REF's flow is: target decode at position p (recording hidden) ->
// DsparkAppend(p) -> the target's token for p + 1 -> DsparkPropose(last = that token). After a
// speculative verification the caller appends the accepted positions only. Appending at a start
// below the state's end rolls the rings back, but positions whose slots the rolled-back ones
// overwrote are gone: rolling back k >= 2 positions leaves the window k - 1 positions short.
//
// Thread-compatible: a DsparkState must not be used by two calls at once; DsparkPropose only reads
// the states it is given.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "engine/layers/state.h"
#include "engine/loading/model.h"

namespace ds41 {

class ThreadPool;

// Per-sequence DSpark state: each draft layer's FP8 window ring of main_x-derived KV (§10.3 window
// entry format), slot = position % window.
struct DsparkState {
  std::vector<WindowRing> rings;  // [n_mtp_layers]

  // REQUIRES: config.has_dspark().
  static DsparkState Create(const ModelConfig& config);
  // Positions < end() have been appended (the next draft block starts there).
  int64_t end() const { return rings.empty() ? 0 : rings[0].end; }
  size_t ByteSize() const;
};

// Appends target positions [start, start + n) from `hidden` [n, targets * dim] (bf16 values, what
// dspark_hidden recorded). start == end(): continues; start < end(): rolls back to start first; start >
// end(): a gap, the rings restart at start (earlier positions absent). Only the last `window` rows
// are computed (the others could not be read). REQUIRES: model has DSpark layers, start >= 0.
void DsparkAppend(const Model& model, DsparkState* state, int64_t start, const float* hidden, int64_t n,
                  ThreadPool* pool);

// stage 0's input projection alone: main_x [n, dim] = RMSNorm(main_norm, Lin8(main_proj, hidden)).
void DsparkMainX(const Model& model, const float* hidden, int64_t n, float* main_x, ThreadPool* pool);

struct DraftRequest {
  const DsparkState* state = nullptr;
  int32_t last_token = 0;  // the target's token for position state->end()
};

struct Draft {
  int64_t start = 0;               // position of slot 0 (the state's end)
  std::vector<int32_t> tokens;     // [block]: slot i's pick, the draft for position start + i + 1
  std::vector<float> logits;       // [block, vocab] fp32: head logits + the Markov bias of slot i
  std::vector<float> confidence;   // [block] fp32: the confidence head's raw output (REF applies no squashing)
  std::vector<float> hidden;       // [block, dim] bf16 values: the collapsed stream the heads read
};

// Picks slot `slot`'s token of request `request` from its biased logits [vocab]; the pick feeds the
// next slot's Markov bias. GreedyDraftPick is REF at temperature 0 (first maximum).
using DraftPicker = std::function<int32_t(size_t request, int slot, const float* logits)>;
int32_t GreedyDraftPick(const float* logits, int vocab);

// One batched draft pass for every request (MODEL.md §9.3) -> drafts[i] for requests[i].
// REQUIRES: model has DSpark layers; tokens in the vocabulary; every state's end() >= 1.
void DsparkPropose(const Model& model, const std::vector<DraftRequest>& requests, const DraftPicker& pick,
                   std::vector<Draft>* drafts, ThreadPool* pool);

}  // namespace ds41
