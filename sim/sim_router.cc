#include "sim/sim_router.h"

#include <chrono>

namespace ds41::sim {

int NodeIndex(const std::string& name, char prefix) {
  if (name.size() < 2 || name[0] != prefix) return -1;
  int v = 0;
  for (size_t i = 1; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return -1;
    v = v * 10 + (name[i] - '0');
  }
  return v;
}

SimRouter::SimRouter(SimRouterOptions options, int decoders, int encoders, WarmDirectory* warm)
    : opt_(std::move(options)),
      warm_(warm),
      placer_(opt_.placer),
      bindings_(opt_.max_sessions),
      polled_dec_(static_cast<size_t>(decoders)),
      polled_enc_(static_cast<size_t>(encoders)),
      held_(static_cast<size_t>(decoders), -1) {
  for (int i = 0; i < decoders; ++i) polled_dec_[static_cast<size_t>(i)].address = DecoderName(i);
  for (int i = 0; i < encoders; ++i) polled_enc_[static_cast<size_t>(i)].address = EncoderName(i);
  dec_ = polled_dec_;
  enc_ = polled_enc_;
}

RouteDecision SimRouter::Route(const std::string& session, int64_t session_id, int64_t N, int64_t H,
                               std::vector<uint64_t> chain, double seconds_left) {
  RouteDecision d;
  // FindCandidates: each decoder as polled, warm when it holds the session at H or is bound there.
  const std::string bound = bindings_.SwaHolder(session, H);
  std::vector<int> seen;
  if (!session.empty()) {
    warm_->VisibleAt(session_id, poll_t_, [&](int decoder, int64_t length) {
      held_[static_cast<size_t>(decoder)] = length;
      seen.push_back(decoder);
    });
  }
  std::string warm_holder;
  for (size_t i = 0; i < dec_.size(); ++i) {
    NodeLoad& c = dec_[i];
    c = polled_dec_[i];  // the last poll, before this router's in-flight counts are applied
    c.warm = DecoderWarmAt(held_[i], H, !bound.empty() && c.address == bound);
    if (c.warm) warm_holder = c.address;
  }
  for (int i : seen) held_[static_cast<size_t>(i)] = -1;
  enc_ = polled_enc_;
  // Candidates sit at their node index, which the name spells: no string hashing per candidate.
  inflight_.Apply(&dec_, &enc_, [](const std::string& address, bool is_decoder) { return NodeIndex(address, is_decoder ? 'd' : 'e'); });

  AttemptInput in;
  in.prompt_tokens = N;
  in.cached_tokens = H;
  in.window = opt_.window;
  in.session = session;
  in.prefix_chain = std::move(chain);
  in.bound = bound;
  in.warm_holder = std::move(warm_holder);
  in.seconds_left = seconds_left;
  in.max_queue_seconds = opt_.max_queue_seconds;
  in.prediction_scale = &prediction_scale_;
  const auto t0 = std::chrono::steady_clock::now();
  AttemptDecision a = DecideAttempt(std::move(in), dec_, enc_, &placer_);
  d.place_seconds = a.place_s;
  d.attempt_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  d.placement = std::move(a.placement);
  d.swa_peer = std::move(a.swa_peer);
  d.refusal = a.refusal;
  d.message = std::move(a.message);
  d.retry_after_s = a.retry_after_s;
  if (d.refusal != AttemptRefusal::kNone) return d;
  d.decoder = NodeIndex(d.placement.decoder, 'd');
  d.encoder = NodeIndex(d.placement.encoder, 'e');
  d.swa_peer_decoder = NodeIndex(d.swa_peer, 'd');
  d.swa_peer_encoder = NodeIndex(d.swa_peer, 'e');
  return d;
}

}  // namespace ds41::sim
