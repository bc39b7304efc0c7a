#include "sim/encoder_model.h"

#include <algorithm>

namespace ds41::sim {

EncoderModel::EncoderModel(int index, EventQueue* queue, HostCpu* cpu, const RateProfile* profile, Listener* listener)
    : index_(index),
      q_(queue),
      cpu_(cpu),
      p_(profile),
      listener_(listener),
      swa_pool_(profile->encoder.swa_pool_bytes, profile->encoder.swa_ttl_s) {}

int EncoderModel::Enqueue(uint64_t request, int64_t from, int64_t to) {
  int h;
  if (!free_.empty()) {
    h = free_.back();
    free_.pop_back();
  } else {
    h = static_cast<int>(jobs_.size());
    jobs_.emplace_back();
  }
  jobs_[h] = Job{request, from, to, false};
  queue_.push_back(h);
  queued_tokens_ += to - from;
  StartStep();
  return h;
}

void EncoderModel::Cancel(int handle) {
  if (handle >= 0 && static_cast<size_t>(handle) < jobs_.size()) jobs_[handle].cancelled = true;
}

void EncoderModel::Release(int handle) {
  queued_tokens_ -= jobs_[handle].end - jobs_[handle].pos;
  free_.push_back(handle);
}

void EncoderModel::StartStep() {
  if (stepping_) return;
  // Before each step the scheduler drops cancelled prefills, then the queued ones join.
  auto cancelled = [&](int h) {
    if (!jobs_[h].cancelled) return false;
    Release(h);
    return true;
  };
  queue_.erase(std::remove_if(queue_.begin(), queue_.end(), cancelled), queue_.end());
  active_.erase(std::remove_if(active_.begin(), active_.end(), cancelled), active_.end());
  while (!queue_.empty()) {
    active_.push_back(queue_.front());
    queue_.pop_front();
  }
  if (active_.empty()) return;
  step_.clear();
  int64_t budget = p_->encoder.step_tokens;
  double work = p_->encoder.step_s;
  for (int h : active_) {
    if (budget <= 0) break;
    const Job& j = jobs_[h];
    const int64_t take = std::min(budget, j.end - j.pos);
    step_.emplace_back(h, take);
    work += p_->EncodeWork(j.pos, j.pos + take);
    budget -= take;
  }
  stepping_ = true;
  ++steps_;
  cpu_->Run(work, this, 0);
}

void EncoderModel::OnEvent(uint32_t, uint64_t, uint64_t) {
  done_.clear();
  for (const auto& [h, take] : step_) {
    Job& j = jobs_[h];
    j.pos += take;
    queued_tokens_ -= take;
    computed_tokens_ += take;
  }
  // A cancelled prefill's step still ran; it leaves before the next one. Finished ones leave now.
  active_.erase(std::remove_if(active_.begin(), active_.end(),
                               [&](int h) {
                                 const Job& j = jobs_[h];
                                 if (j.pos < j.end || j.cancelled) return false;
                                 done_.push_back(j.request);
                                 free_.push_back(h);
                                 return true;
                               }),
                active_.end());
  stepping_ = false;
  StartStep();
  std::vector<uint64_t> done;
  done.swap(done_);
  for (uint64_t r : done) listener_->OnPrefilled(index_, r);
  done.clear();
  if (done_.empty()) done_.swap(done);
}

}  // namespace ds41::sim
