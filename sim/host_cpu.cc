#include "sim/host_cpu.h"

#include <algorithm>
#include <limits>

namespace ds41::sim {
namespace {
// Work left below this is done: completion times are computed from the same rate they are advanced
// with, so what remains at a completion is rounding.
constexpr double kDoneS = 1e-12;
}  // namespace

void HostCpu::Run(double work_s, EventSink* sink, uint32_t kind, uint64_t a, uint64_t b) {
  work_s = std::max(0.0, work_s);
  if (cores_ <= 0) {
    work_done_s_ += work_s;
    q_->After(work_s, sink, kind, a, b);
    return;
  }
  Advance();
  jobs_.push_back(Job{work_s, work_s, sink, kind, a, b});
  Reschedule();
}

double HostCpu::Rate() const {
  const double n = static_cast<double>(jobs_.size());
  return n <= cores_ ? 1.0 : cores_ / n;
}

void HostCpu::Advance() {
  const double now = q_->now();
  if (!jobs_.empty() && now > last_) {
    const double progress = (now - last_) * Rate();
    for (Job& j : jobs_) j.remaining -= progress;
  }
  last_ = now;
}

void HostCpu::Reschedule() {
  ++generation_;
  if (jobs_.empty()) return;
  double least = std::numeric_limits<double>::infinity();
  for (const Job& j : jobs_) least = std::min(least, j.remaining);
  q_->After(std::max(0.0, least) / Rate(), this, 0, generation_);
}

void HostCpu::OnEvent(uint32_t, uint64_t generation, uint64_t) {
  if (generation != generation_) return;  // superseded by a later Run or completion
  Advance();
  done_.clear();
  for (size_t i = 0; i < jobs_.size();) {
    if (jobs_[i].remaining <= kDoneS) {
      done_.push_back(jobs_[i]);
      jobs_[i] = jobs_.back();
      jobs_.pop_back();
    } else {
      ++i;
    }
  }
  Reschedule();
  // Completions may start new jobs (Run re-enters): they see the pool without the finished ones.
  std::vector<Job> done;
  done.swap(done_);
  for (const Job& j : done) {
    work_done_s_ += j.work;
    j.sink->OnEvent(j.kind, j.a, j.b);
  }
  done.clear();
  if (done_.empty()) done_.swap(done);  // keep the scratch capacity
}

}  // namespace ds41::sim
