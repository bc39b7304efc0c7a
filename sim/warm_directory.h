// WarmDirectory: which decoders held which sessions warm, and when — what the router's last poll
// of the decoders showed (NodeView::warm_sessions), without copying every decoder's session list at
// every poll. Decoders report each keep and each drop; the router asks, for one session, who held it
// at the poll's time. Records no poll can show any more are pruned as they are met.
// Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace ds41::sim {

class WarmDirectory {
 public:
  explicit WarmDirectory(size_t sessions) : records_(sessions) {}

  // `decoder` keeps `session` at `length` context tokens from `t` on.
  void Held(int64_t session, int decoder, int64_t length, double t);
  // `decoder` no longer holds `session` from `t` on (taken by a new turn, evicted, expired).
  void Dropped(int64_t session, int decoder, double t);
  // Calls f(decoder, length) for each decoder that held `session` at time `poll_t`. Records that
  // ended by poll_t are dropped: polls only move forward.
  template <typename F>
  void VisibleAt(int64_t session, double poll_t, F&& f) {
    auto& v = records_[static_cast<size_t>(session)];
    for (size_t i = 0; i < v.size();) {
      if (v[i].until <= poll_t) {
        v[i] = v.back();
        v.pop_back();
        continue;
      }
      if (v[i].from <= poll_t) f(v[i].decoder, v[i].length);
      ++i;
    }
  }

 private:
  struct Record {
    int decoder;
    int64_t length;
    double from, until;
  };
  std::vector<std::vector<Record>> records_;
};

}  // namespace ds41::sim
