// EncoderModel: one encoder node's scheduler (encoder_node/encoder_core.cc) — prefills queue, join
// the active set at the next step, and share each step's token budget oldest first; a step's work
// is the profile's cost of the positions it computes (sharing one forward pass: one step overhead)
// and runs on the host's CPU. A cancelled prefill leaves at the next step boundary. Status reports
// what the real node's does: queued_tokens (remaining, queued and active) and running (both).
// The caller does what the real node does before queueing (prefix load, SWA restore or replay).
// Not thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "router/rate_profile.h"
#include "sim/byte_lru.h"
#include "sim/event_queue.h"
#include "sim/host_cpu.h"

namespace ds41::sim {

class EncoderModel : public EventSink {
 public:
  class Listener {
   public:
    virtual void OnPrefilled(int encoder, uint64_t request) = 0;

   protected:
    ~Listener() = default;
  };

  EncoderModel(int index, EventQueue* queue, HostCpu* cpu, const RateProfile* profile, Listener* listener);

  // Queues the computation of positions [from, to) for `request`; returns a handle for Cancel.
  int Enqueue(uint64_t request, int64_t from, int64_t to);
  void Cancel(int handle);

  int64_t queued_tokens() const { return queued_tokens_; }
  int64_t running() const { return static_cast<int64_t>(queue_.size() + active_.size()); }
  int64_t computed_tokens() const { return computed_tokens_; }
  uint64_t steps() const { return steps_; }
  ByteLru<char>& swa_pool() { return swa_pool_; }

  void OnEvent(uint32_t kind, uint64_t a, uint64_t b) override;

 private:
  struct Job {
    uint64_t request = 0;
    int64_t pos = 0, end = 0;
    bool cancelled = false;
  };
  void StartStep();
  void Release(int handle);

  const int index_;
  EventQueue* q_;
  HostCpu* cpu_;
  const RateProfile* p_;
  Listener* listener_;
  std::vector<Job> jobs_;
  std::vector<int> free_;
  std::deque<int> queue_;
  std::vector<int> active_;                     // oldest first
  std::vector<std::pair<int, int64_t>> step_;   // (job, tokens) of the step in progress
  std::vector<uint64_t> done_;                  // scratch
  bool stepping_ = false;
  int64_t queued_tokens_ = 0;
  int64_t computed_tokens_ = 0;
  uint64_t steps_ = 0;
  ByteLru<char> swa_pool_;
};

}  // namespace ds41::sim
