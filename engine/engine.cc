#include "engine/engine.h"

#include <algorithm>
#include <cstring>

#include "engine/loading/engram_layout.h"

namespace ds41 {

int64_t DefaultReplayStart(const ModelConfig& c, int64_t n) { return std::max<int64_t>(0, n - c.window_size); }

Status Engine::CheckSpan(const TokenSpan& span, const char* what, int64_t computed_from) const {
  const ModelConfig& c = model_.config();
  for (size_t i = 0; i < span.tokens.size(); ++i)
    if (span.tokens[i] < 0 || span.tokens[i] >= c.vocab_size)
      return InvalidArgumentError(std::string(what) + ": token " + std::to_string(span.tokens[i]) + " at index " +
                                  std::to_string(i) + " is outside [0, " + std::to_string(c.vocab_size) + ")");
  if (!span.image.empty() && span.image.size() != span.tokens.size())
    return InvalidArgumentError(std::string(what) + ": image flags must match the tokens in number");
  if (!span.image_embeds.empty()) {
    const int64_t n = static_cast<int64_t>(span.tokens.size()), from = span.image_embeds_from;
    if (from < 0 || from > n || span.image.empty())
      return InvalidArgumentError(std::string(what) + ": image embeddings need flags and a start within the tokens");
    const size_t flagged = static_cast<size_t>(std::count(span.image.begin() + from, span.image.end(), uint8_t{1}));
    if (span.image_embeds.size() != flagged * static_cast<size_t>(c.dim))
      return InvalidArgumentError(std::string(what) + ": image embeddings must be [flagged rows from index " +
                                  std::to_string(from) + " (" + std::to_string(flagged) + "), hidden_size]");
    for (int64_t p = std::max<int64_t>(0, computed_from); p < std::min(from, n); ++p)
      if (span.image[p])
        return InvalidArgumentError(std::string(what) + ": image row " + std::to_string(p) +
                                    " is computed but its embedding is not given (they start at " + std::to_string(from) + ")");
  }
  return Status::Ok();
}

TokenSpan TokenSpan::Slice(size_t from, size_t to, int dim) const {
  TokenSpan out;
  out.tokens.assign(tokens.begin() + from, tokens.begin() + to);
  if (image.empty()) return out;
  out.image.assign(image.begin() + from, image.begin() + to);
  if (image_embeds.empty()) return out;
  const size_t first = static_cast<size_t>(image_embeds_from);
  const size_t lo = std::min(std::max(from, first), to);
  const size_t before = static_cast<size_t>(std::count(image.begin() + first, image.begin() + std::max(lo, first), uint8_t{1}));
  const size_t inside = static_cast<size_t>(std::count(image.begin() + lo, image.begin() + to, uint8_t{1}));
  out.image_embeds.assign(image_embeds.begin() + before * dim, image_embeds.begin() + (before + inside) * dim);
  out.image_embeds_from = static_cast<int64_t>(lo - from);
  return out;
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

Status Engine::CaptureDspark(ForwardPass* pass, int first_layer, std::vector<float>* out, const char* what) const {
  if (out == nullptr) return Status::Ok();
  const ModelConfig& c = model_.config();
  if (!c.has_dspark()) return FailedPreconditionError(std::string(what) + ": the model has no DSpark layers");
  for (int L : c.dspark_target_layer_ids)
    if (L < first_layer)
      return FailedPreconditionError(std::string(what) + ": DSpark target layer " + std::to_string(L) +
                                     " does not run in this pass (it starts at layer " + std::to_string(first_layer) + ")");
  if (pass == nullptr) return Status::Ok();  // checks only
  out->assign(static_cast<size_t>(pass->rows()) * c.dspark_target_layer_ids.size() * c.dim, 0.0f);
  pass->dspark_hidden = out;
  return Status::Ok();
}

Status Engine::DsparkAppend(DsparkState* state, int64_t start, const std::vector<float>& hidden) const {
  const ModelConfig& c = model_.config();
  if (!c.has_dspark()) return FailedPreconditionError("dspark: the model has no DSpark layers");
  if (state->rings.size() != static_cast<size_t>(c.n_mtp_layers))
    return InvalidArgumentError("dspark: the state was not made for this model");
  if (start < 0) return InvalidArgumentError("dspark: negative start position");
  const size_t width = c.dspark_target_layer_ids.size() * static_cast<size_t>(c.dim);
  if (hidden.size() % width != 0)
    return InvalidArgumentError("dspark: hidden rows must be [n, " + std::to_string(width) + "]");
  ds41::DsparkAppend(model_, state, start, hidden.data(), static_cast<int64_t>(hidden.size() / width), pool_);
  return Status::Ok();
}

Status Engine::DsparkDraft(const std::vector<DraftRequest>& requests, const DraftPicker& pick,
                           std::vector<Draft>* drafts) const {
  const ModelConfig& c = model_.config();
  if (!c.has_dspark()) return FailedPreconditionError("dspark: the model has no DSpark layers");
  for (size_t i = 0; i < requests.size(); ++i) {
    const DraftRequest& r = requests[i];
    if (r.state == nullptr || r.state->rings.size() != static_cast<size_t>(c.n_mtp_layers))
      return InvalidArgumentError("dspark: request " + std::to_string(i) + " has no state for this model");
    if (r.state->end() < 1)
      return FailedPreconditionError("dspark: request " + std::to_string(i) + " has no target position appended");
    if (r.last_token < 0 || r.last_token >= c.vocab_size)
      return InvalidArgumentError("dspark: request " + std::to_string(i) + ": token " + std::to_string(r.last_token) +
                                  " is outside the vocabulary");
    for (size_t j = 0; j < i; ++j)
      if (requests[j].state == r.state) return InvalidArgumentError("dspark: a state appears twice in one draft pass");
  }
  const int V = c.vocab_size;
  DraftPicker greedy = [V](size_t, int, const float* logits) { return GreedyDraftPick(logits, V); };
  ds41::DsparkPropose(model_, requests, pick ? pick : greedy, drafts, pool_);
  for (const Draft& d : *drafts)
    for (int32_t t : d.tokens)
      if (t < 0 || t >= V) return InvalidArgumentError("dspark: the picker returned token " + std::to_string(t));
  return Status::Ok();
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
  TokenSpan part = span.Slice(from, to, dim);
  seg.tokens = std::move(part.tokens);
  seg.image = std::move(part.image);
  seg.image_embeds = std::move(part.image_embeds);
  seg.image_embeds_from = static_cast<int>(part.image_embeds_from);
  return seg;
}
}  // namespace

Status Engine::Prefill(SequenceState* state, const TokenSpan& span, bool all_logits, std::vector<float>* logits,
                       std::vector<float>* dspark_hidden) {
  const ModelConfig& c = model_.config();
  DS41_RETURN_IF_ERROR(CheckSpan(span, "prefill"));
  if (span.tokens.empty()) return InvalidArgumentError("prefill: no tokens");
  for (int L = 0; L < c.n_layers; ++L)
    if (state->rings[L].end != state->length)
      return FailedPreconditionError("prefill: layer " + std::to_string(L) + " state is at position " +
                                     std::to_string(state->rings[L].end) + ", sequence at " + std::to_string(state->length));
  const int64_t start = state->length;
  std::vector<Segment> segs{MakeSegment(state, start, span, 0, span.tokens.size(), c.dim)};
  ForwardPass pass(model_, &segs, pool_, experts_);
  Observe(&pass, start);
  DS41_RETURN_IF_ERROR(CaptureDspark(&pass, 0, dspark_hidden, "prefill"));
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
                           std::vector<float>* logits, std::vector<float>* dspark_hidden) {
  if (states.size() != tokens.size()) return InvalidArgumentError("decode: one token per sequence");
  std::vector<std::vector<int32_t>> rows(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) rows[i] = {tokens[i]};
  return Step(states, rows, logits, dspark_hidden, nullptr, "decode");
}

Status Engine::VerifyBatch(const std::vector<SequenceState*>& states, const std::vector<std::vector<int32_t>>& rows,
                           std::vector<float>* logits, std::vector<float>* dspark_hidden, std::vector<StateUndo>* undo) {
  if (states.size() != rows.size()) return InvalidArgumentError("verify: one row list per sequence");
  const int W = model_.config().window_size;
  for (const auto& r : rows)
    if (r.empty() || static_cast<int>(r.size()) > W)
      return InvalidArgumentError("verify: each sequence verifies 1 to " + std::to_string(W) + " rows");
  return Step(states, rows, logits, dspark_hidden, undo, "verify");
}

Status Engine::Step(const std::vector<SequenceState*>& states, const std::vector<std::vector<int32_t>>& rows,
                    std::vector<float>* logits, std::vector<float>* dspark_hidden, std::vector<StateUndo>* undo,
                    const char* what) {
  const ModelConfig& c = model_.config();
  const std::string w = what;
  if (states.empty()) return InvalidArgumentError(w + ": empty batch");
  std::vector<Segment> segs;
  for (size_t i = 0; i < states.size(); ++i) {
    const TokenSpan span{rows[i], {}, {}};
    DS41_RETURN_IF_ERROR(CheckSpan(span, what));
    for (size_t j = 0; j < i; ++j)
      if (states[j] == states[i]) return InvalidArgumentError(w + ": a sequence appears twice in one batch");
    for (int L = 0; L < c.n_layers; ++L)
      if (states[i]->rings[L].end != states[i]->length)
        return FailedPreconditionError(w + ": layer " + std::to_string(L) + " is not at the sequence end");
    if (undo != nullptr)
      for (const KvSourceCache& kv : states[i]->kv)
        if (kv.processed != states[i]->length)
          return FailedPreconditionError(w + ": a compressor is not at the sequence end");
    segs.push_back(MakeSegment(states[i], states[i]->length, span, 0, rows[i].size(), c.dim));
  }
  ForwardPass pass(model_, &segs, pool_, experts_);
  Observe(&pass, segs.size() == 1 ? segs[0].start : -1);
  DS41_RETURN_IF_ERROR(CaptureDspark(&pass, 0, dspark_hidden, what));
  if (undo != nullptr) {
    undo->assign(states.size(), StateUndo{});
    for (size_t i = 0; i < states.size(); ++i) {
      BeginUndo(c, *states[i], static_cast<int>(rows[i].size()), &(*undo)[i]);
      segs[i].undo = &(*undo)[i];
    }
  }
  pass.Embed();
  for (size_t i = 0; i < states.size(); ++i) states[i]->length += static_cast<int64_t>(rows[i].size());
  pass.RunLayers(0, c.n_layers);
  std::vector<int> out(static_cast<size_t>(pass.rows()));
  for (int r = 0; r < pass.rows(); ++r) out[static_cast<size_t>(r)] = r;
  pass.Logits(out, logits);
  return Status::Ok();
}

Status Engine::BeginEncode(SequenceState* state, TokenSpan span, EncodeJob* job) {
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
  *job = EncodeJob{};
  job->state = state;
  job->span = std::move(span);
  job->h = h;
  job->n = n;
  // The CED source window the replay can use: what the ring holds at h, then the new positions.
  const WindowRing& ering = state->rings[E];
  job->window.start = std::max<int64_t>({ering.first_valid(W), n - 2 * W + 1, 0});
  for (int64_t p = job->window.start; p < h; ++p)
    job->window.entries.insert(job->window.entries.end(), ering.slots.begin() + (p % W) * eb,
                               ering.slots.begin() + (p % W + 1) * eb);
  return Status::Ok();
}

Status Engine::EncodeStep(const std::vector<EncodeJob*>& jobs, const std::vector<int64_t>& counts) {
  const ModelConfig& c = model_.config();
  if (jobs.size() != counts.size() || jobs.empty()) return InvalidArgumentError("encode step: one count per job");
  std::vector<Segment> segs;
  for (size_t i = 0; i < jobs.size(); ++i) {
    EncodeJob* j = jobs[i];
    if (counts[i] <= 0 || counts[i] > j->remaining()) return InvalidArgumentError("encode step: bad chunk size");
    for (size_t k = 0; k < i; ++k)
      if (jobs[k]->state == j->state) return InvalidArgumentError("encode step: a sequence appears twice");
    segs.push_back(MakeSegment(j->state, j->h + j->done, j->span, static_cast<size_t>(j->done),
                               static_cast<size_t>(j->done + counts[i]), c.dim));
  }
  ForwardPass pass(model_, &segs, pool_, experts_);
  Observe(&pass, segs.size() == 1 ? segs[0].start : -1);
  pass.Embed();
  for (size_t i = 0; i < jobs.size(); ++i) jobs[i]->state->length += counts[i];
  pass.RunLayers(0, c.ced_split);
  std::vector<uint8_t> produced;
  pass.ProjectCedSource(&produced);
  const int eb = c.window_entry_bytes(), W = c.window_size;
  for (size_t i = 0; i < jobs.size(); ++i) {
    EncodeJob* j = jobs[i];
    const int64_t first = j->h + j->done;
    j->done += counts[i];
    for (int64_t p = std::max(first, j->window.start); p < first + counts[i]; ++p) {
      const size_t row = static_cast<size_t>(segs[i].row0 + (p - first));
      j->window.entries.insert(j->window.entries.end(), produced.begin() + row * eb, produced.begin() + (row + 1) * eb);
    }
    // Decoder replay needs at most 2 * window - 1 positions of it.
    const int64_t have = static_cast<int64_t>(j->window.entries.size()) / eb;
    if (have > 2 * W - 1) {
      const int64_t drop = have - (2 * W - 1);
      j->window.entries.erase(j->window.entries.begin(), j->window.entries.begin() + drop * eb);
      j->window.start += drop;
    }
  }
  return Status::Ok();
}

StatusOr<EncoderHandoff> Engine::FinishEncode(EncodeJob* j) {
  const ModelConfig& c = model_.config();
  if (j->remaining() != 0) return FailedPreconditionError("encode: the job has tokens left");
  const int W = c.window_size, hc = c.hc_mult, HD = c.hc_dim();
  EncoderHandoff out;
  out.h = j->h;
  out.n = j->n;
  out.window = std::move(j->window);
  const StreamRing& sr = j->state->encoder_out;
  out.stream_start = std::max<int64_t>(j->n - W, sr.end - W > sr.floor ? sr.end - W : sr.floor);
  for (int64_t p = out.stream_start; p < j->n; ++p) {
    out.x.insert(out.x.end(), sr.x.begin() + (p % W) * HD, sr.x.begin() + (p % W + 1) * HD);
    out.pre.insert(out.pre.end(), sr.pre.begin() + (p % W) * hc, sr.pre.begin() + (p % W + 1) * hc);
  }
  return out;
}

StatusOr<EncoderHandoff> Engine::EncodePrefill(SequenceState* state, const TokenSpan& span) {
  EncodeJob job;
  DS41_RETURN_IF_ERROR(BeginEncode(state, span, &job));
  DS41_RETURN_IF_ERROR(EncodeStep({&job}, {job.remaining()}));
  return FinishEncode(&job);
}

Status Engine::DecoderReplay(SequenceState* state, const TokenSpan& prompt, const EncoderHandoff& handoff,
                             int64_t s, std::vector<float>* logits, bool all_rows, std::vector<float>* dspark_hidden) {
  const ModelConfig& c = model_.config();
  if (!c.ced_capable) return FailedPreconditionError("CED is not possible with this configuration: " + c.ced_problem);
  DS41_RETURN_IF_ERROR(CheckSpan(prompt, "replay", s));
  const int64_t n = handoff.n;
  if (static_cast<int64_t>(prompt.tokens.size()) != n)
    return InvalidArgumentError("replay: the prompt must hold positions [0, " + std::to_string(n) + ")");
  if (s < handoff.stream_start || s >= n)
    return InvalidArgumentError("replay: start " + std::to_string(s) + " outside the handed-off stream [" +
                                std::to_string(handoff.stream_start) + ", " + std::to_string(n) + ")");
  if (state->length != n) return FailedPreconditionError("replay: the state does not hold the prompt's global KV");
  const int E = c.ced_split, hc = c.hc_mult, HD = c.hc_dim();
  std::vector<float> probe;  // the capture's checks, before the state changes
  if (dspark_hidden != nullptr) DS41_RETURN_IF_ERROR(CaptureDspark(nullptr, E, &probe, "replay"));
  for (int L = E + 1; L < c.n_layers; ++L) state->rings[L].floor = state->rings[L].end = s;  // bounded replay at s

  std::vector<Segment> segs{MakeSegment(state, s, prompt, s, n, c.dim)};
  segs[0].history = HistoryBefore(prompt, s);
  segs[0].ced_window = &handoff.window;
  ForwardPass pass(model_, &segs, pool_, experts_);
  Observe(&pass, s);
  DS41_RETURN_IF_ERROR(CaptureDspark(&pass, E, dspark_hidden, "replay"));
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
  DS41_RETURN_IF_ERROR(CheckSpan(prompt, "encoder replay", start));
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
  ForwardPass pass(model_, &segs, pool_, experts_);
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
  DS41_ASSIGN_OR_RETURN(EncoderHandoff handoff,
                        EncodePrefill(state, prompt.Slice(static_cast<size_t>(h), prompt.tokens.size(), model_.config().dim)));
  return DecoderReplay(state, prompt, handoff, replay_start < 0 ? DefaultReplayStart(model_.config(), n) : replay_start,
                       logits);
}

namespace {
template <typename T>
void PutVec(std::string* out, const std::vector<T>& v) {
  const uint64_t n = v.size();
  out->append(reinterpret_cast<const char*>(&n), 8);
  out->append(reinterpret_cast<const char*>(v.data()), n * sizeof(T));
}
template <typename T>
bool GetVec(const std::string& s, size_t* off, std::vector<T>* v, uint64_t max) {
  uint64_t n;
  if (s.size() - *off < 8) return false;
  std::memcpy(&n, s.data() + *off, 8);
  *off += 8;
  if (n > max || (s.size() - *off) / sizeof(T) < n) return false;
  v->resize(n);
  std::memcpy(v->data(), s.data() + *off, n * sizeof(T));
  *off += n * sizeof(T);
  return true;
}
}  // namespace

std::string SerializeHandoff(const EncoderHandoff& h) {
  std::string out = "DS41HOF1";
  for (int64_t v : {h.h, h.n, h.stream_start, h.window.start}) out.append(reinterpret_cast<const char*>(&v), 8);
  PutVec(&out, h.x);
  PutVec(&out, h.pre);
  PutVec(&out, h.window.entries);
  return out;
}

StatusOr<EncoderHandoff> ParseHandoff(const std::string& s, const ModelConfig& c) {
  auto bad = [](const char* w) { return DataLossError(std::string("handoff: ") + w); };
  if (s.size() < 8 + 32 || s.compare(0, 8, "DS41HOF1") != 0) return bad("bad magic");
  EncoderHandoff h;
  int64_t v[4];
  std::memcpy(v, s.data() + 8, 32);
  h.h = v[0];
  h.n = v[1];
  h.stream_start = v[2];
  h.window.start = v[3];
  size_t off = 40;
  const uint64_t W = static_cast<uint64_t>(c.window_size);
  if (!GetVec(s, &off, &h.x, W * c.hc_dim()) || !GetVec(s, &off, &h.pre, W * c.hc_mult) ||
      !GetVec(s, &off, &h.window.entries, 2 * W * c.window_entry_bytes()) || off != s.size())
    return bad("bad sizes");
  const int64_t rows = h.n - h.stream_start;
  if (h.h < 0 || h.n <= h.h || rows <= 0 || rows > static_cast<int64_t>(W) ||
      h.x.size() != static_cast<size_t>(rows) * c.hc_dim() || h.pre.size() != static_cast<size_t>(rows) * c.hc_mult ||
      h.window.entries.size() % c.window_entry_bytes() != 0 ||
      h.window.start + static_cast<int64_t>(h.window.entries.size() / c.window_entry_bytes()) != h.n)
    return bad("inconsistent fields");
  return h;
}

StatusOr<std::vector<float>> Engine::EncodeImage(const float* patches, int n_vit_h, int n_vit_w) const {
  DS41_ASSIGN_OR_RETURN(ImageGrid grid, VisionGrid(model_.config(), n_vit_h, n_vit_w));
  if (patches == nullptr) return InvalidArgumentError("EncodeImage: no patches");
  std::vector<float> features, rows;
  VisionTower(model_, patches, grid.n_vit_h, grid.n_vit_w, &features, pool_);
  VisionAligner(model_, features, grid, &rows, pool_);
  return rows;
}

StatusOr<std::vector<float>> Engine::EncodeImage(const std::vector<float>& patches, int n_vit_h, int n_vit_w) const {
  DS41_ASSIGN_OR_RETURN(ImageGrid grid, VisionGrid(model_.config(), n_vit_h, n_vit_w));
  const size_t want = static_cast<size_t>(grid.patches()) * model_.config().vision_patch_inputs();
  if (patches.size() != want)
    return InvalidArgumentError("EncodeImage: " + std::to_string(patches.size()) + " patch values for a " +
                                std::to_string(n_vit_h) + "x" + std::to_string(n_vit_w) + " grid, expected " +
                                std::to_string(want) + " (3 * patch_size^2 per patch)");
  return EncodeImage(patches.data(), n_vit_h, n_vit_w);
}

StatusOr<std::vector<float>> Engine::ImageSpanEmbeds(const std::vector<float>& rows, int n_vit_h, int n_vit_w) const {
  const ModelConfig& c = model_.config();
  DS41_ASSIGN_OR_RETURN(ImageGrid grid, VisionGrid(c, n_vit_h, n_vit_w));
  const size_t want = static_cast<size_t>(grid.image_rows()) * c.dim;
  if (rows.size() != want)
    return InvalidArgumentError("ImageSpanEmbeds: " + std::to_string(rows.size()) + " values, expected " +
                                std::to_string(grid.image_rows()) + " aligner rows of " + std::to_string(c.dim));
  std::vector<float> out(static_cast<size_t>(grid.span_length()) * c.dim);
  BuildImageSpan(model_.weights().vision, c.dim, rows.data(), grid, out.data());
  return out;
}

}  // namespace ds41
