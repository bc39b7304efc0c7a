#include "engine/engine.h"

#include <algorithm>

#include "engine/engram_layout.h"

namespace ds41 {

int64_t DefaultReplayStart(const ModelConfig& c, int64_t n) { return std::max<int64_t>(0, n - c.window_size); }

Status Engine::CheckSpan(const TokenSpan& span, const char* what) const {
  const ModelConfig& c = model_.config();
  for (size_t i = 0; i < span.tokens.size(); ++i)
    if (span.tokens[i] < 0 || span.tokens[i] >= c.vocab_size)
      return InvalidArgumentError(std::string(what) + ": token " + std::to_string(span.tokens[i]) + " at index " +
                                  std::to_string(i) + " is outside [0, " + std::to_string(c.vocab_size) + ")");
  if (!span.image.empty() && span.image.size() != span.tokens.size())
    return InvalidArgumentError(std::string(what) + ": image flags must match the tokens in number");
  if (!span.image_embeds.empty() && span.image_embeds.size() != span.tokens.size() * static_cast<size_t>(c.dim))
    return InvalidArgumentError(std::string(what) + ": image embeddings must be [tokens, hidden_size]");
  return Status::Ok();
}

std::vector<int64_t> Engine::HistoryBefore(const TokenSpan& prompt, int64_t pos) const {
  const ModelConfig& c = model_.config();
  if (c.engram_layer_ids.empty()) return {};
  std::vector<int64_t> h(c.engram_max_ngram_size - 1, kEngramBeforeStart);
  for (size_t k = 0; k < h.size(); ++k) {
    const int64_t p = pos - 1 - static_cast<int64_t>(k);
    if (p < 0) break;
    h[k] = (!prompt.image.empty() && prompt.image[p]) ? kEngramDead : model_.engram_token_map()[prompt.tokens[p]];
  }
  return h;
}

void Engine::Observe(ForwardPass* pass, int64_t first_pos) {
  if (!observer_) return;
  pass->on_layer_done = [this, first_pos, pass](int layer, const std::vector<float>& X) {
    observer_(layer, first_pos, pass->rows(), X);
  };
}

namespace {
Segment MakeSegment(SequenceState* s, int64_t start, const TokenSpan& span, size_t from, size_t to, int dim) {
  Segment seg;
  seg.state = s;
  seg.start = start;
  seg.tokens.assign(span.tokens.begin() + from, span.tokens.begin() + to);
  if (!span.image.empty()) seg.image.assign(span.image.begin() + from, span.image.begin() + to);
  if (!span.image_embeds.empty())
    seg.image_embeds.assign(span.image_embeds.begin() + from * dim, span.image_embeds.begin() + to * dim);
  return seg;
}
}  // namespace

Status Engine::Prefill(SequenceState* state, const TokenSpan& span, bool all_logits, std::vector<float>* logits) {
  const ModelConfig& c = model_.config();
  DS41_RETURN_IF_ERROR(CheckSpan(span, "prefill"));
  if (span.tokens.empty()) return InvalidArgumentError("prefill: no tokens");
  for (int L = 0; L < c.n_layers; ++L)
    if (state->rings[L].end != state->length)
      return FailedPreconditionError("prefill: layer " + std::to_string(L) + " state is at position " +
                                     std::to_string(state->rings[L].end) + ", sequence at " + std::to_string(state->length));
  const int64_t start = state->length;
  std::vector<Segment> segs{MakeSegment(state, start, span, 0, span.tokens.size(), c.dim)};
  ForwardPass pass(model_, &segs, pool_);
  Observe(&pass, start);
  pass.Embed();
  state->length = start + static_cast<int64_t>(span.tokens.size());
  pass.RunLayers(0, c.n_layers);
  std::vector<int> rows;
  if (all_logits) {
    for (int r = 0; r < pass.rows(); ++r) rows.push_back(r);
  } else {
    rows.push_back(pass.rows() - 1);
  }
  pass.Logits(rows, logits);
  return Status::Ok();
}

Status Engine::DecodeBatch(const std::vector<SequenceState*>& states, const std::vector<int32_t>& tokens,
                           std::vector<float>* logits) {
  const ModelConfig& c = model_.config();
  if (states.size() != tokens.size()) return InvalidArgumentError("decode: one token per sequence");
  if (states.empty()) return InvalidArgumentError("decode: empty batch");
  std::vector<Segment> segs;
  for (size_t i = 0; i < states.size(); ++i) {
    TokenSpan one{{tokens[i]}, {}, {}};
    DS41_RETURN_IF_ERROR(CheckSpan(one, "decode"));
    for (size_t j = 0; j < i; ++j)
      if (states[j] == states[i]) return InvalidArgumentError("decode: a sequence appears twice in one batch");
    for (int L = 0; L < c.n_layers; ++L)
      if (states[i]->rings[L].end != states[i]->length)
        return FailedPreconditionError("decode: layer " + std::to_string(L) + " is not at the sequence end");
    segs.push_back(MakeSegment(states[i], states[i]->length, one, 0, 1, c.dim));
  }
  ForwardPass pass(model_, &segs, pool_);
  Observe(&pass, segs.size() == 1 ? segs[0].start : -1);
  pass.Embed();
  for (SequenceState* s : states) ++s->length;
  pass.RunLayers(0, c.n_layers);
  std::vector<int> rows(states.size());
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<int>(i);
  pass.Logits(rows, logits);
  return Status::Ok();
}

StatusOr<EncoderHandoff> Engine::EncodePrefill(SequenceState* state, const TokenSpan& span) {
  const ModelConfig& c = model_.config();
  if (!c.ced_capable) return FailedPreconditionError("CED is not possible with this configuration: " + c.ced_problem);
  DS41_RETURN_IF_ERROR(CheckSpan(span, "encode"));
  if (span.tokens.empty()) return InvalidArgumentError("encode: no tokens");
  const int E = c.ced_split, W = c.window_size, eb = c.window_entry_bytes();
  const int64_t h = state->length, n = h + static_cast<int64_t>(span.tokens.size());
  for (int L = 0; L <= E; ++L)
    if (state->rings[L].end != h)
      return FailedPreconditionError("encode: layer " + std::to_string(L) + " state is at position " +
                                     std::to_string(state->rings[L].end) + ", sequence at " + std::to_string(h));

  EncoderHandoff out;
  out.h = h;
  out.n = n;
  // The CED source window the replay can use: what the ring holds at h, then the new positions.
  const WindowRing& ering = state->rings[E];
  out.window.start = std::max<int64_t>({ering.first_valid(W), n - 2 * W + 1, 0});
  for (int64_t p = out.window.start; p < h; ++p)
    out.window.entries.insert(out.window.entries.end(), ering.slots.begin() + (p % W) * eb,
                              ering.slots.begin() + (p % W + 1) * eb);

  std::vector<Segment> segs{MakeSegment(state, h, span, 0, span.tokens.size(), c.dim)};
  ForwardPass pass(model_, &segs, pool_);
  Observe(&pass, h);
  pass.Embed();
  state->length = n;
  pass.RunLayers(0, E);
  std::vector<uint8_t> produced;
  pass.ProjectCedSource(&produced);
  const int64_t keep_from = std::max(out.window.start, h);
  out.window.entries.insert(out.window.entries.end(), produced.begin() + (keep_from - h) * eb, produced.end());

  const StreamRing& sr = state->encoder_out;
  out.stream_start = std::max<int64_t>(n - W, sr.end - W > sr.floor ? sr.end - W : sr.floor);
  const int hc = c.hc_mult, HD = c.hc_dim();
  for (int64_t p = out.stream_start; p < n; ++p) {
    out.x.insert(out.x.end(), sr.x.begin() + (p % W) * HD, sr.x.begin() + (p % W + 1) * HD);
    out.pre.insert(out.pre.end(), sr.pre.begin() + (p % W) * hc, sr.pre.begin() + (p % W + 1) * hc);
  }
  return out;
}

Status Engine::DecoderReplay(SequenceState* state, const TokenSpan& prompt, const EncoderHandoff& handoff,
                             int64_t s, std::vector<float>* logits, bool all_rows) {
  const ModelConfig& c = model_.config();
  if (!c.ced_capable) return FailedPreconditionError("CED is not possible with this configuration: " + c.ced_problem);
  DS41_RETURN_IF_ERROR(CheckSpan(prompt, "replay"));
  const int64_t n = handoff.n;
  if (static_cast<int64_t>(prompt.tokens.size()) != n)
    return InvalidArgumentError("replay: the prompt must hold positions [0, " + std::to_string(n) + ")");
  if (s < handoff.stream_start || s >= n)
    return InvalidArgumentError("replay: start " + std::to_string(s) + " outside the handed-off stream [" +
                                std::to_string(handoff.stream_start) + ", " + std::to_string(n) + ")");
  if (state->length != n) return FailedPreconditionError("replay: the state does not hold the prompt's global KV");
  const int E = c.ced_split, hc = c.hc_mult, HD = c.hc_dim();
  for (int L = E + 1; L < c.n_layers; ++L) state->rings[L].floor = state->rings[L].end = s;  // bounded replay at s

  std::vector<Segment> segs{MakeSegment(state, s, prompt, s, n, c.dim)};
  segs[0].history = HistoryBefore(prompt, s);
  segs[0].ced_window = &handoff.window;
  ForwardPass pass(model_, &segs, pool_);
  Observe(&pass, s);
  const size_t off = static_cast<size_t>(s - handoff.stream_start);
  pass.SetStream(std::vector<uint16_t>(handoff.x.begin() + off * HD, handoff.x.end()),
                 std::vector<float>(handoff.pre.begin() + off * hc, handoff.pre.end()));
  pass.RunLayers(E, c.n_layers);
  std::vector<int> rows;
  for (int r = all_rows ? 0 : pass.rows() - 1; r < pass.rows(); ++r) rows.push_back(r);
  pass.Logits(rows, logits);
  return Status::Ok();
}

Status Engine::EncoderReplay(SequenceState* state, const TokenSpan& prompt, int64_t start) {
  const ModelConfig& c = model_.config();
  if (!c.ced_capable) return FailedPreconditionError("CED is not possible with this configuration: " + c.ced_problem);
  DS41_RETURN_IF_ERROR(CheckSpan(prompt, "encoder replay"));
  const int64_t h = state->length;
  if (static_cast<int64_t>(prompt.tokens.size()) < h)
    return InvalidArgumentError("encoder replay: the prompt must cover positions [0, " + std::to_string(h) + ")");
  if (start < 0 || start >= h) return InvalidArgumentError("encoder replay: start outside [0, h)");
  const int E = c.ced_split;
  for (int L = 0; L <= E; ++L) state->rings[L].floor = state->rings[L].end = start;
  state->encoder_out.floor = state->encoder_out.end = start;
  for (size_t i = 0; i < state->kv.size(); ++i) {
    const int m = c.compress_ratios[c.kv_source_layers[i]];
    KvSourceCache& kv = state->kv[i];
    if (kv.processed / m * m < start)
      return FailedPreconditionError("encoder replay: compressed KV of layer " + std::to_string(c.kv_source_layers[i]) +
                                     " ends before the replay start");
    // The open group is rebuilt from the replayed rows (an approximation, MODEL.md §11 item 2).
    kv.processed = std::min<int64_t>(kv.processed, h) / m * m;
  }
  std::vector<Segment> segs{MakeSegment(state, start, prompt, start, h, c.dim)};
  segs[0].history = HistoryBefore(prompt, start);
  ForwardPass pass(model_, &segs, pool_);
  Observe(&pass, start);
  pass.Embed();
  pass.RunLayers(0, E);
  std::vector<uint8_t> produced;
  pass.ProjectCedSource(&produced);
  const std::vector<int64_t> hist = HistoryBefore(prompt, h);
  if (!hist.empty()) state->engram_history = hist;
  return Status::Ok();
}

Status Engine::CedPrefill(SequenceState* state, const TokenSpan& prompt, int64_t replay_start,
                          std::vector<float>* logits) {
  const int64_t h = state->length, n = static_cast<int64_t>(prompt.tokens.size());
  if (n <= h) return InvalidArgumentError("ced prefill: the prompt adds no tokens beyond the state");
  TokenSpan suffix;
  suffix.tokens.assign(prompt.tokens.begin() + h, prompt.tokens.end());
  if (!prompt.image.empty()) suffix.image.assign(prompt.image.begin() + h, prompt.image.end());
  if (!prompt.image_embeds.empty())
    suffix.image_embeds.assign(prompt.image_embeds.begin() + h * model_.config().dim, prompt.image_embeds.end());
  DS41_ASSIGN_OR_RETURN(EncoderHandoff handoff, EncodePrefill(state, suffix));
  return DecoderReplay(state, prompt, handoff, replay_start < 0 ? DefaultReplayStart(model_.config(), n) : replay_start,
                       logits);
}

}  // namespace ds41
