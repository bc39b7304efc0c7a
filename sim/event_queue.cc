#include "sim/event_queue.h"

#include <algorithm>

namespace ds41::sim {

void EventQueue::At(double t, EventSink* sink, uint32_t kind, uint64_t a, uint64_t b) {
  heap_.push_back(Event{t < now_ ? now_ : t, order_++, sink, kind, a, b});
  std::push_heap(heap_.begin(), heap_.end(), Later);
}

bool EventQueue::Step() {
  if (heap_.empty()) return false;
  std::pop_heap(heap_.begin(), heap_.end(), Later);
  const Event e = heap_.back();
  heap_.pop_back();
  now_ = e.t;
  ++processed_;
  e.sink->OnEvent(e.kind, e.a, e.b);
  return true;
}

}  // namespace ds41::sim
