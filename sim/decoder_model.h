// DecoderModel: one decoder node (decoder_node/decoder_core.cc) — admission control (running +
// waiting over max_running is refused), continuous batching (the sequences running when a step
// starts decode one token each; those admitted meanwhile join the next step), a step's work from
// the profile (batch size and summed context) on the host's CPU, warm sessions kept under a byte
// budget and TTL (serving/session_cache.h's rules), an SWA pool. Status reports running, waiting,
// resident bytes (warm sessions + running sequences + SWA pool) and, through the WarmDirectory,
// the sessions it holds. The admission's phases (prefix fetch, prefill, replay) are the caller's.
//
// Speed: on hardware of its own (host_cores 0) a step's length is known when it starts, so the
// model plans a run of steps up to the first sequence's last token as one event and hands out the
// tokens with their step times when it fires; a join or a cancel cuts the run at the step in
// progress, where the batch changes, so every token's time is what step-by-step simulation gives.
// On a shared host (steps slowed by whatever else runs) it steps one event at a time.
// Not thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "router/rate_profile.h"
#include "sim/byte_lru.h"
#include "sim/event_queue.h"
#include "sim/host_cpu.h"
#include "sim/warm_directory.h"

namespace ds41::sim {

// A session kept warm: the turn that left it (a workload request index) and its context length.
struct WarmTurn {
  int64_t request = -1;
  int64_t prompt_tokens = 0;
  int64_t length = 0;  // context fed: prompt + generated - 1
};

class DecoderModel : public EventSink {
 public:
  class Listener {
   public:
    // One token of `request` came out of the step that ended at `t` (<= now: see below).
    virtual void OnToken(int decoder, uint64_t request, double t) = 0;

   protected:
    ~Listener() = default;
  };

  DecoderModel(int index, EventQueue* queue, HostCpu* cpu, const RateProfile* profile, WarmDirectory* warm,
               Listener* listener);

  // An admission starts (DecoderCore::Admit's check, with this request counted as waiting): false
  // when running + waiting would exceed max_running. On true, it waits until Join or Abandon.
  bool TryAdmit();
  void Abandon();  // the admission failed or was cancelled
  // The admitted sequence joins the batch after its first token: `context` tokens fed so far,
  // `tokens` more to generate. Returns a handle for Cancel and Leave.
  int Join(uint64_t request, int64_t context, int64_t tokens);
  void Cancel(int handle);  // leaves at the next step boundary

  // SessionCache::Take: the warm session when it holds at least `boundary` positions, is no longer
  // than the prompt and agrees with it on [0, boundary) (`agrees(turn)` tells), then removed.
  template <typename Agrees>
  std::optional<WarmTurn> TakeWarm(int64_t session, int64_t prompt_tokens, int64_t boundary, Agrees&& agrees);
  // SessionCache::Put at a turn's end.
  void KeepWarm(int64_t session, const WarmTurn& turn);
  ByteLru<char>& swa_pool() { return swa_pool_; }

  int64_t running() const { return static_cast<int64_t>(running_.size() + batch_.size()); }
  int64_t waiting() const { return waiting_; }
  uint64_t resident_bytes() const;
  uint64_t steps() const { return steps_; }
  double planned_work_s() const { return planned_work_s_; }  // steps run without the host CPU (host_cores 0)

  void OnEvent(uint32_t kind, uint64_t a, uint64_t b) override;

 private:
  struct Seq {
    uint64_t request = 0;
    int64_t context = 0;
    int64_t left = 0;
    bool cancelled = false;
  };
  void StartStep();
  // The time from the run's start to the end of its m-th step.
  double RunTime(int64_t m) const;
  // A join or cancel: the run ends with the step in progress.
  void CutRun();
  double StateBytes(int64_t context) const;

  const int index_;
  EventQueue* q_;
  HostCpu* cpu_;
  const RateProfile* p_;
  WarmDirectory* warm_;
  Listener* listener_;
  std::vector<Seq> seqs_;
  std::vector<int> free_;
  std::vector<int> running_, batch_;  // waiting for the next step; in the step in progress
  int64_t waiting_ = 0;
  bool stepping_ = false;
  uint64_t steps_ = 0;
  // The run of steps in progress (one step on a shared host): batch_ decodes run_steps_ steps from
  // run_start_, at first with run_context_ context tokens in all.
  double run_start_ = 0;
  int64_t run_steps_ = 0, run_context_ = 0, run_batch_ = 0;
  uint64_t generation_ = 0;
  std::vector<double> step_ends_;  // scratch: the run's step end times
  double planned_work_s_ = 0;
  double running_bytes_ = 0;
  ByteLru<WarmTurn> sessions_;
  ByteLru<char> swa_pool_;
};

template <typename Agrees>
std::optional<WarmTurn> DecoderModel::TakeWarm(int64_t session, int64_t prompt_tokens, int64_t boundary, Agrees&& agrees) {
  const double now = q_->now();
  const WarmTurn* w = sessions_.Peek(static_cast<uint64_t>(session), now);
  if (w == nullptr || w->length < boundary || w->length > prompt_tokens || !agrees(*w)) return std::nullopt;
  WarmTurn out = *w;
  sessions_.Erase(static_cast<uint64_t>(session));
  warm_->Dropped(session, index_, now);
  return out;
}

}  // namespace ds41::sim
