// SessionBindings: which nodes ended each session's last turn, and at which positions they keep
// its SWA state; and the per-request marks placement derives from that (SERVING.md §4): which
// decoder counts as warm, who to ask for the SWA state at H. No I/O: the router and the simulator
// (sim/) decide with the same code.
// Thread-safe: one mutex guards the table.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <string>
#include <unordered_map>

#include "util/mutex.h"
#include "util/thread_annotations.h"

namespace ds41 {

class SessionBindings {
 public:
  // Keeps the `max_sessions` most recently bound sessions.
  explicit SessionBindings(size_t max_sessions) : max_sessions_(max_sessions) {}

  // The node that holds `session`'s SWA state at `position`: the decoder when its turn's context
  // ended there, else the encoder when the prompt ended there; "" when neither (or no session).
  std::string SwaHolder(const std::string& session, int64_t position) const;
  // A turn ended: `decoder` keeps the state at decoder_end ("" / -1: none), `encoder` at
  // encoder_end (an empty encoder keeps the previous one's record). Returns the sessions remembered.
  size_t Bind(const std::string& session, const std::string& decoder, int64_t decoder_end, const std::string& encoder,
              int64_t encoder_end);

 private:
  struct Binding {
    std::string decoder, encoder;
    int64_t decoder_end = -1;  // SWA state position the decoder keeps (context fed at turn end)
    int64_t encoder_end = -1;  // SWA state position the encoder keeps (prompt end)
    std::list<std::string>::iterator lru;
  };
  const size_t max_sessions_;
  mutable Mutex mu_;
  std::unordered_map<std::string, Binding> sessions_ DS41_GUARDED_BY(mu_);
  std::list<std::string> lru_ DS41_GUARDED_BY(mu_);  // most recent first
};

// A decoder is warm for a request at cached prefix H when it reports holding the session at exactly
// H (`held_length`, -1: not held; an older turn is not warm), or it is the node the session is bound
// to at H.
inline bool DecoderWarmAt(int64_t held_length, int64_t H, bool bound_here) { return held_length == H || bound_here; }

// Who to ask for the SWA state at H: the bound holder, else a decoder that reports the session warm
// (it keeps the state at its turn's end), so a restarted router loses nothing; "" when H == 0.
inline const std::string& SwaPeer(const std::string& bound, const std::string& warm_holder, int64_t H) {
  static const std::string kNone;
  if (!bound.empty()) return bound;
  return H > 0 ? warm_holder : kNone;
}

// The encoder continues from the SWA state at H without a replay when H == 0 or someone holds it
// (a stale hint falls back to a replay on the encoder).
inline bool SwaAvailable(int64_t H, const std::string& swa_peer) { return H == 0 || !swa_peer.empty(); }

}  // namespace ds41
