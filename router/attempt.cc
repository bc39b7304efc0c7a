#include "router/attempt.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

#include "router/session_bindings.h"

namespace ds41 {

const char* AttemptRefusalName(AttemptRefusal r) {
  switch (r) {
    case AttemptRefusal::kNone: return "none";
    case AttemptRefusal::kDecodersFull: return "decoders_full";
    case AttemptRefusal::kDeadline: return "deadline";
    case AttemptRefusal::kQueue: return "queue";
  }
  return "none";
}

AttemptDecision DecideAttempt(AttemptInput in, const std::vector<NodeLoad>& decoders, const std::vector<NodeLoad>& encoders,
                              Placer* placer) {
  AttemptDecision d;
  const int64_t H = in.cached_tokens;
  const auto excluded = [&](const std::string& node) { return in.excluded != nullptr && in.excluded->count(node) > 0; };
  d.swa_peer = SwaPeer(in.bound, in.warm_holder, H);
  if ((d.swa_peer.empty() || excluded(d.swa_peer)) && H > 0 && !in.swa_fallback.empty() && !excluded(in.swa_fallback)) {
    d.swa_peer = in.swa_fallback;
  }
  PlacementInput p_in;
  p_in.prompt_tokens = in.prompt_tokens;
  p_in.cached_tokens = H;
  p_in.window = in.window;
  p_in.swa_available = SwaAvailable(H, d.swa_peer);
  p_in.session = std::move(in.session);
  p_in.prefix_chain = std::move(in.prefix_chain);
  const auto t0 = std::chrono::steady_clock::now();
  d.placement = placer->Place(p_in, decoders, encoders);
  d.place_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const Placement& p = d.placement;
  if (p.decoder.empty()) {
    d.refusal = AttemptRefusal::kDecodersFull;
    d.message = "every decoder is at its running limit";
    return d;
  }
  // A prompt whose predicted first token falls after its deadline is refused now, not started and
  // abandoned half way (its encoder time would be spent for nobody).
  if (p.predicted_seconds > in.seconds_left) {
    d.refusal = AttemptRefusal::kDeadline;
    char msg[160];
    std::snprintf(msg, sizeof msg, "the predicted time to the first token, %.1f s, is past the %.1f s left before the request's deadline",
                  p.predicted_seconds, std::max(0.0, in.seconds_left));
    d.message = msg;
    return d;
  }
  // Overload: a new request (not a retry or a migration, already admitted) that would wait behind
  // more queued work than max_queue_seconds is refused now, quickly, with the predicted excess as
  // its retry-after hint; what is admitted keeps a bounded time to the first token.
  if (in.max_queue_seconds > 0 && in.first_attempt) {
    d.queue_wait_s = p.queue_seconds * (in.prediction_scale != nullptr ? in.prediction_scale->Scale() : 1.0);
    if (d.queue_wait_s > in.max_queue_seconds) {
      d.refusal = AttemptRefusal::kQueue;
      d.retry_after_s = static_cast<int>(std::clamp(std::ceil(d.queue_wait_s - in.max_queue_seconds), 1.0, 60.0));
      char msg[200];
      std::snprintf(msg, sizeof msg, "overloaded: the predicted wait behind queued work, %.1f s, exceeds the router's %.1f s",
                    d.queue_wait_s, in.max_queue_seconds);
      d.message = msg;
      return d;
    }
  }
  placer->Served(p_in, p);
  return d;
}

}  // namespace ds41
