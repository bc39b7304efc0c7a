// EventQueue: the simulator's clock and its pending events, a binary heap ordered by (time, order
// of scheduling), so equal times run first-scheduled first and every run is deterministic. An event
// is plain data delivered to an EventSink (a node model, the host's CPU, the driver): no allocation
// per event. A model that wants to take an event back bumps a generation it passes in the event's
// arguments and ignores stale ones.
// Not thread-safe: one simulation runs on one thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ds41::sim {

class EventSink {
 public:
  virtual void OnEvent(uint32_t kind, uint64_t a, uint64_t b) = 0;

 protected:
  ~EventSink() = default;
};

class EventQueue {
 public:
  double now() const { return now_; }
  // Schedules `sink->OnEvent(kind, a, b)` at time `t`; a time before now() runs at now().
  void At(double t, EventSink* sink, uint32_t kind, uint64_t a = 0, uint64_t b = 0);
  void After(double dt, EventSink* sink, uint32_t kind, uint64_t a = 0, uint64_t b = 0) { At(now_ + dt, sink, kind, a, b); }
  // Runs the earliest event (advancing now()); false when there is none.
  bool Step();
  // The earliest pending event's time; REQUIRES: !empty().
  double next_time() const { return heap_.front().t; }
  bool empty() const { return heap_.empty(); }
  size_t pending() const { return heap_.size(); }
  uint64_t processed() const { return processed_; }

 private:
  struct Event {
    double t;
    uint64_t order;
    EventSink* sink;
    uint32_t kind;
    uint64_t a, b;
  };
  static bool Later(const Event& x, const Event& y) { return x.t > y.t || (x.t == y.t && x.order > y.order); }

  std::vector<Event> heap_;
  double now_ = 0;
  uint64_t order_ = 0;
  uint64_t processed_ = 0;
};

}  // namespace ds41::sim
