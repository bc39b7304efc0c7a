#include "node_client/node_codec.h"

#include "node_client/node_protocol.h"
#include "unit/unit_format.h"

namespace ds41 {

namespace pb = ds41::node::v1;

const char* NodeRoleName(NodeRole r) { return r == NodeRole::kEncoder ? "encoder" : "decoder"; }

namespace {

Status CheckPromptLength(int n) {
  if (static_cast<size_t>(n) > kMaxPromptTokens)
    return InvalidArgumentError("prompt longer than " + std::to_string(kMaxPromptTokens) + " tokens");
  return Status::Ok();
}

template <typename Request>
void EncodeImages(const std::vector<PromptImage>& images, Request* req) {
  for (const PromptImage& im : images) {
    auto* out = req->add_images();
    out->set_start(im.start);
    out->set_vit_h(im.n_vit_h);
    out->set_vit_w(im.n_vit_w);
    out->set_hash(std::string(reinterpret_cast<const char*>(im.hash.data()), im.hash.size()));
    out->set_pixels(im.pixels);
  }
}

template <typename Request>
Status DecodeImages(const Request& req, std::vector<PromptImage>* images) {
  if (static_cast<size_t>(req.images_size()) > kMaxPromptImages)
    return InvalidArgumentError("more than " + std::to_string(kMaxPromptImages) + " images");
  for (const auto& im : req.images()) {
    PromptImage out;
    out.start = im.start();
    out.n_vit_h = im.vit_h();
    out.n_vit_w = im.vit_w();
    if (im.hash().size() != out.hash.size()) return InvalidArgumentError("image hash must be 32 bytes");
    std::copy(im.hash().begin(), im.hash().end(), out.hash.begin());
    out.pixels = im.pixels();
    images->push_back(std::move(out));
  }
  return Status::Ok();
}

}  // namespace

void EncodePrefillRequest(const PrefillInput& in, const std::string& fingerprint, pb::PrefillRequest* req) {
  FillModel(fingerprint, req->mutable_model());
  req->mutable_ns()->set_id(KeyString(in.ns));
  req->mutable_tokens()->Add(in.tokens.begin(), in.tokens.end());
  req->set_cached_tokens(in.cached_tokens);
  req->mutable_swa()->set_peer(in.swa_peer);
  req->set_unit_tokens(in.unit_tokens);
  EncodeImages(in.images, req);
}

Status DecodePrefillRequest(const pb::PrefillRequest& req, const std::string& fingerprint, PrefillInput* in) {
  DS41_RETURN_IF_ERROR(CheckModel(req.model(), fingerprint));
  DS41_RETURN_IF_ERROR(ParseNs(req.ns(), &in->ns));
  DS41_RETURN_IF_ERROR(CheckPromptLength(req.tokens_size()));
  in->tokens.assign(req.tokens().begin(), req.tokens().end());
  DS41_RETURN_IF_ERROR(DecodeImages(req, &in->images));
  in->cached_tokens = req.cached_tokens();
  in->swa_peer = req.swa().peer();
  in->unit_tokens = req.unit_tokens();
  return Status::Ok();
}

void EncodePrefillResponse(PrefillOutput out, pb::PrefillResponse* resp) {
  for (std::string& u : out.units) resp->add_units(std::move(u));
  resp->set_swa_state(std::move(out.swa));
  resp->set_handoff(std::move(out.handoff));
  pb::PrefillStats* st = resp->mutable_stats();
  st->set_computed_tokens(out.computed_tokens);
  st->set_replay_tokens(out.replay_tokens);
  st->set_swa_source(out.swa_source);
  st->set_cached_tokens(out.cached_tokens);
}

PrefillOutput DecodePrefillResponse(pb::PrefillResponse* resp) {
  PrefillOutput out;
  out.units.reserve(resp->units_size());
  for (std::string& u : *resp->mutable_units()) out.units.push_back(std::move(u));
  out.swa = std::move(*resp->mutable_swa_state());
  out.handoff = std::move(*resp->mutable_handoff());
  out.cached_tokens = resp->stats().cached_tokens();
  out.computed_tokens = resp->stats().computed_tokens();
  out.replay_tokens = resp->stats().replay_tokens();
  out.swa_source = resp->stats().swa_source();
  return out;
}

void EncodeGenerateRequest(const GenerateInput& in, const std::string& fingerprint, pb::GenerateRequest* req) {
  FillModel(fingerprint, req->mutable_model());
  req->set_request_id(in.request_id);
  req->set_session_id(in.session_id);
  req->mutable_ns()->set_id(KeyString(in.ns));
  req->mutable_tokens()->Add(in.tokens.begin(), in.tokens.end());
  req->set_cached_tokens(in.cached_tokens);
  req->set_encoder(in.encoder);
  req->mutable_swa()->set_peer(in.swa_peer);
  req->set_unit_tokens(in.unit_tokens);
  req->set_resumed_tokens(static_cast<int32_t>(in.resumed));
  pb::Sampling* s = req->mutable_sampling();
  s->set_temperature(in.sampling.temperature);
  s->set_top_p(in.sampling.top_p);
  s->set_seed(in.sampling.seed);
  s->set_max_tokens(in.sampling.max_tokens);
  s->mutable_stop_token_ids()->Add(in.sampling.stop_ids.begin(), in.sampling.stop_ids.end());
  s->set_frequency_penalty(in.sampling.frequency_penalty);
  s->set_presence_penalty(in.sampling.presence_penalty);
  for (const auto& [token, bias] : in.sampling.logit_bias) {
    pb::LogitBias* b = s->add_logit_bias();
    b->set_token(token);
    b->set_bias(bias);
  }
  s->set_logprobs(in.sampling.logprobs);
  s->set_top_logprobs(in.sampling.top_logprobs);
  s->set_response_json(in.sampling.response_json);
  s->set_response_schema(in.sampling.response_schema);
  s->set_response_after_reasoning(in.sampling.response_after_reasoning);
  s->set_tool_call_spec(in.sampling.tool_calls);
  EncodeImages(in.images, req);
}

Status DecodeGenerateRequest(const pb::GenerateRequest& req, const std::string& fingerprint, GenerateInput* in) {
  DS41_RETURN_IF_ERROR(CheckModel(req.model(), fingerprint));
  DS41_RETURN_IF_ERROR(ParseNs(req.ns(), &in->ns));
  DS41_RETURN_IF_ERROR(CheckPromptLength(req.tokens_size()));
  const pb::Sampling& s = req.sampling();
  if (static_cast<size_t>(s.stop_token_ids_size()) > kMaxStopTokens) return InvalidArgumentError("too many stop tokens");
  if (static_cast<size_t>(s.logit_bias_size()) > kMaxLogitBias) return InvalidArgumentError("too many logit_bias entries");
  if (s.top_logprobs() < 0 || s.top_logprobs() > kMaxTopLogprobs) {
    return InvalidArgumentError("top_logprobs must be in [0, " + std::to_string(kMaxTopLogprobs) + "]");
  }
  if (s.response_schema().size() > kMaxResponseSchemaBytes) return InvalidArgumentError("response_schema too large");
  if (!s.response_schema().empty() && !s.response_json()) {
    return InvalidArgumentError("response_schema is set without response_json");
  }
  if (s.response_after_reasoning() && !s.response_json()) {
    return InvalidArgumentError("response_after_reasoning is set without response_json");
  }
  if (s.tool_call_spec().size() > kMaxResponseSchemaBytes) return InvalidArgumentError("tool_call_spec too large");
  if (!s.tool_call_spec().empty() && s.response_json()) {
    return InvalidArgumentError("a reply cannot be both a JSON document and tool calls");
  }
  if (req.resumed_tokens() < 0 || req.resumed_tokens() >= req.tokens_size()) {
    return InvalidArgumentError("resumed_tokens must be in [0, the number of tokens)");
  }
  in->request_id = req.request_id();
  in->session_id = req.session_id().substr(0, kMaxSessionIdBytes);
  in->tokens.assign(req.tokens().begin(), req.tokens().end());
  in->cached_tokens = req.cached_tokens();
  in->encoder = req.encoder();
  in->swa_peer = req.swa().peer();
  in->sampling.temperature = s.temperature();
  in->sampling.top_p = s.top_p() == 0 ? 1.0f : s.top_p();  // proto3's default means "not set"
  in->sampling.seed = s.seed();
  in->sampling.max_tokens = s.max_tokens() == 0 ? 16 : s.max_tokens();
  in->sampling.stop_ids.assign(s.stop_token_ids().begin(), s.stop_token_ids().end());
  in->sampling.frequency_penalty = s.frequency_penalty();
  in->sampling.presence_penalty = s.presence_penalty();
  in->sampling.logit_bias.clear();
  for (const pb::LogitBias& b : s.logit_bias()) in->sampling.logit_bias.emplace_back(b.token(), b.bias());
  in->sampling.logprobs = s.logprobs();
  in->sampling.top_logprobs = s.top_logprobs();
  in->sampling.response_json = s.response_json();
  in->sampling.response_schema = s.response_schema();
  in->sampling.response_after_reasoning = s.response_after_reasoning();
  in->sampling.tool_calls = s.tool_call_spec();
  in->unit_tokens = req.unit_tokens() == 0 ? kDefaultUnitTokens : req.unit_tokens();
  in->resumed = req.resumed_tokens();
  return DecodeImages(req, &in->images);
}

void EncodeGenerated(const GeneratedTokens& t, pb::GenerateResponse* out) {
  out->mutable_tokens()->Add(t.ids.begin(), t.ids.end());
  for (const TokenLogprob& lp : t.logprobs) {
    pb::TokenLogprob* m = out->add_logprobs();
    m->set_logprob(lp.logprob);
    for (const auto& [id, logprob] : lp.top) {
      m->add_top_ids(id);
      m->add_top_logprobs(logprob);
    }
  }
}

StatusOr<GeneratedTokens> DecodeGenerated(const pb::GenerateResponse& msg) {
  if (msg.logprobs_size() != 0 && msg.logprobs_size() != msg.tokens_size()) {
    return InvalidArgumentError("generate response: log-probabilities are not one per token");
  }
  GeneratedTokens t;
  t.ids.assign(msg.tokens().begin(), msg.tokens().end());
  for (const pb::TokenLogprob& m : msg.logprobs()) {
    if (m.top_ids_size() != m.top_logprobs_size() || m.top_ids_size() > kMaxTopLogprobs) {
      return InvalidArgumentError("generate response: a malformed top_logprobs list");
    }
    TokenLogprob lp;
    lp.logprob = m.logprob();
    for (int i = 0; i < m.top_ids_size(); ++i) lp.top.emplace_back(m.top_ids(i), m.top_logprobs(i));
    t.logprobs.push_back(std::move(lp));
  }
  return t;
}

void EncodeUsage(const GenerateUsage& u, pb::Usage* out) {
  out->set_prompt_tokens(u.prompt_tokens);
  out->set_completion_tokens(u.completion_tokens);
  out->set_cached_tokens(u.cached_tokens);
  out->set_computed_tokens(u.computed_tokens);
  out->set_encoder_replay_tokens(u.encoder_replay_tokens);
  out->set_decoder_replay_tokens(u.decoder_replay_tokens);
  out->set_prefix_source(u.prefix_source);
  out->set_swa_source(u.swa_source);
  out->set_ttft_seconds(u.ttft_seconds);
}

GenerateUsage DecodeUsage(const pb::Usage& u) {
  GenerateUsage out;
  out.prompt_tokens = u.prompt_tokens();
  out.completion_tokens = u.completion_tokens();
  out.cached_tokens = u.cached_tokens();
  out.computed_tokens = u.computed_tokens();
  out.encoder_replay_tokens = u.encoder_replay_tokens();
  out.decoder_replay_tokens = u.decoder_replay_tokens();
  out.prefix_source = u.prefix_source();
  out.swa_source = u.swa_source();
  out.ttft_seconds = u.ttft_seconds();
  return out;
}

namespace {

// The checks both calls share; `what` names the call in the message ("prefill", "generate").
// Image spans lie in [0, prompt_end), in order, apart, within the model's span cap, with pixels of
// their grid's size, and hold their key tokens; every other token is a vocabulary id.
Status CheckPromptAndUnits(const char* what, const std::vector<int32_t>& tokens, const std::vector<PromptImage>& images,
                           int64_t prompt_end, int64_t cached_tokens, int unit_tokens, const ModelConfig& c) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  const std::string w(what);
  if (n == 0) return InvalidArgumentError(w + ": empty prompt");
  if (cached_tokens < 0 || cached_tokens >= n) return InvalidArgumentError(w + ": cached_tokens must be in [0, N)");
  DS41_RETURN_IF_ERROR(UnitLayout::FromConfig(c, unit_tokens).status());
  if (!images.empty() && (!c.vision || c.image_token_id < 0))
    return InvalidArgumentError(w + ": the model does not take images");
  int64_t next = 0;  // the first position the next span may take
  size_t k = 0;
  for (int64_t p = 0; p < n; ++p) {
    if (k < images.size() && p == images[k].start) {
      const PromptImage& im = images[k];
      const std::string field = w + ": image " + std::to_string(k);
      const int r = c.vision_downsample_ratio, patch = c.vision_patch_size;
      if (im.n_vit_h < 1 || im.n_vit_w < 1 || im.n_vit_h > 4096 || im.n_vit_w > 4096)
        return InvalidArgumentError(field + ": patch grid out of range");
      const int64_t h = (im.n_vit_h + r - 1) / r, wd = (im.n_vit_w + r - 1) / r, len = h * (wd + 1) + 2;
      if (len > c.vision_max_n_token)
        return InvalidArgumentError(field + ": " + std::to_string(len) + " positions, over the model's " +
                                    std::to_string(c.vision_max_n_token));
      if (im.pixels.size() != static_cast<size_t>(im.n_vit_h) * patch * im.n_vit_w * patch * 3)
        return InvalidArgumentError(field + ": pixels must be the grid's RGB8 rows");
      if (p + len > prompt_end) return InvalidArgumentError(field + ": its span runs past the prompt");
      for (int64_t j = 0; j < len; ++j)
        if (tokens[p + j] != ImageKeyToken(im.hash, j))
          return InvalidArgumentError(field + ": position " + std::to_string(p + j) + " does not hold its key token");
      p += len - 1;
      next = p + 1;
      ++k;
      continue;
    }
    if (tokens[p] < 0 || tokens[p] >= c.vocab_size)
      return InvalidArgumentError(w + ": token " + std::to_string(tokens[p]) + " at " + std::to_string(p) +
                                  " outside the vocabulary");
  }
  if (k < images.size())
    return InvalidArgumentError(w + ": image " + std::to_string(k) + " starts at " + std::to_string(images[k].start) +
                                (images[k].start < next ? ", inside the span before it" : ", outside the prompt"));
  return Status::Ok();
}

}  // namespace

Status CheckPrefillInput(const PrefillInput& in, const ModelConfig& model) {
  return CheckPromptAndUnits("prefill", in.tokens, in.images, static_cast<int64_t>(in.tokens.size()), in.cached_tokens,
                             in.unit_tokens, model);
}

Status CheckGenerateInput(const GenerateInput& in, const ModelConfig& model) {
  // A migrated request holds the prompt and then the tokens its failed attempt streamed (resumed);
  // its cached prefix and its images lie inside the prompt.
  const int64_t n = static_cast<int64_t>(in.tokens.size());
  if (in.resumed < 0 || in.resumed >= n) return InvalidArgumentError("generate: resumed tokens must be in [0, N)");
  DS41_RETURN_IF_ERROR(
      CheckPromptAndUnits("generate", in.tokens, in.images, n - in.resumed, in.cached_tokens, in.unit_tokens, model));
  if (in.cached_tokens >= n - in.resumed) {
    return InvalidArgumentError("generate: cached_tokens must be in [0, N - resumed)");
  }
  if (in.sampling.max_tokens == 0) return InvalidArgumentError("generate: max_tokens must be at least 1");
  if (in.encoder.empty()) return InvalidArgumentError("generate: no encoder given");
  return Status::Ok();
}

void EncodeSwaStateRequest(const UnitKey& ns, const UnitKey& prefix_key, int64_t position, const std::string& fingerprint,
                           pb::SwaStateRequest* req) {
  FillModel(fingerprint, req->mutable_model());
  req->mutable_ns()->set_id(KeyString(ns));
  req->set_prefix_key(KeyString(prefix_key));
  req->set_position(position);
}

Status DecodeSwaStateRequest(const pb::SwaStateRequest& req, const std::string& fingerprint, UnitKey* ns,
                             UnitKey* prefix_key) {
  DS41_RETURN_IF_ERROR(CheckModel(req.model(), fingerprint));
  DS41_RETURN_IF_ERROR(ParseNs(req.ns(), ns));
  return ParseKey(req.prefix_key(), prefix_key);
}

void EncodeNodeStatus(const NodeStatusReport& r, pb::NodeStatus* out) {
  out->set_model_fingerprint(r.fingerprint);
  out->set_role(r.role);
  out->set_running(r.running);
  out->set_waiting(r.waiting);
  out->set_queued_tokens(r.queued_tokens);
  out->set_resident_bytes(static_cast<int64_t>(r.resident_bytes));
  for (const auto& [id, length] : r.warm_sessions) {
    out->add_warm_sessions(id);
    out->add_warm_session_lengths(length);
  }
}

NodeStatusReport DecodeNodeStatus(const pb::NodeStatus& s) {
  NodeStatusReport r;
  r.fingerprint = s.model_fingerprint();
  r.role = s.role();
  r.running = s.running();
  r.waiting = s.waiting();
  r.queued_tokens = s.queued_tokens();
  r.resident_bytes = static_cast<uint64_t>(s.resident_bytes());
  for (int i = 0; i < s.warm_sessions_size(); ++i)
    r.warm_sessions.emplace_back(s.warm_sessions(i), i < s.warm_session_lengths_size() ? s.warm_session_lengths(i) : -1);
  return r;
}

}  // namespace ds41
