// HostCpu: the processor the nodes' threads run on. Work is CPU-seconds of one thread at full speed
// (what the calibration measures with nothing else running). With `cores` = 0 every job has a core
// of its own (a deployment where each node has its hardware: a job of w seconds takes w seconds).
// With cores = c > 0 every node shares one host of c cores, as the local cluster does (all its
// processes on one 2-vCPU machine): egalitarian processor sharing, each of n running jobs
// progressing at min(1, c / n) — so a prefill and a decode step slow each other down as they do
// there. A job is single-threaded (the nodes run with --threads 1).
// Not thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/event_queue.h"

namespace ds41::sim {

class HostCpu : public EventSink {
 public:
  HostCpu(EventQueue* queue, int cores) : q_(queue), cores_(cores) {}

  // Runs `work_s` CPU-seconds; `sink->OnEvent(kind, a, b)` when done. work_s <= 0 completes at once
  // (still through the queue, after what is already due now).
  void Run(double work_s, EventSink* sink, uint32_t kind, uint64_t a = 0, uint64_t b = 0);

  int cores() const { return cores_; }
  size_t running() const { return jobs_.size(); }
  double work_done_s() const { return work_done_s_; }  // CPU-seconds of finished jobs

  void OnEvent(uint32_t kind, uint64_t a, uint64_t b) override;

 private:
  struct Job {
    double remaining;
    double work;
    EventSink* sink;
    uint32_t kind;
    uint64_t a, b;
  };
  double Rate() const;
  void Advance();     // progress every job to now
  void Reschedule();  // the next completion, superseding the one scheduled before

  EventQueue* q_;
  const int cores_;
  std::vector<Job> jobs_;
  std::vector<Job> done_;  // scratch
  double last_ = 0;
  uint64_t generation_ = 0;
  double work_done_s_ = 0;
};

}  // namespace ds41::sim
