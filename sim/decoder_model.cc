#include "sim/decoder_model.h"

#include <algorithm>
#include <cstdint>

namespace ds41::sim {

DecoderModel::DecoderModel(int index, EventQueue* queue, HostCpu* cpu, const RateProfile* profile, WarmDirectory* warm,
                           Listener* listener)
    : index_(index),
      q_(queue),
      cpu_(cpu),
      p_(profile),
      warm_(warm),
      listener_(listener),
      sessions_(profile->decoder.session_bytes, profile->decoder.session_ttl_s),
      swa_pool_(profile->decoder.swa_pool_bytes, profile->decoder.swa_ttl_s) {
  sessions_.set_on_evict([this](uint64_t session, const WarmTurn&) {
    warm_->Dropped(static_cast<int64_t>(session), index_, q_->now());
  });
}

double DecoderModel::StateBytes(int64_t context) const {
  return static_cast<double>(context) * p_->decoder.state_bytes_per_token + static_cast<double>(p_->decoder.state_fixed_bytes);
}

uint64_t DecoderModel::resident_bytes() const {
  return sessions_.bytes() + swa_pool_.bytes() + static_cast<uint64_t>(running_bytes_);
}

bool DecoderModel::TryAdmit() {
  // DecoderCore::Admit counts the request as waiting first, then refuses when running + waiting
  // exceeds the limit.
  if (running() + waiting_ + 1 > p_->decoder.max_running) return false;
  ++waiting_;
  return true;
}

void DecoderModel::Abandon() { --waiting_; }

int DecoderModel::Join(uint64_t request, int64_t context, int64_t tokens) {
  --waiting_;
  int h;
  if (!free_.empty()) {
    h = free_.back();
    free_.pop_back();
  } else {
    h = static_cast<int>(seqs_.size());
    seqs_.emplace_back();
  }
  seqs_[h] = Seq{request, context, tokens, false};
  running_bytes_ += StateBytes(context);
  running_.push_back(h);
  if (stepping_) {
    CutRun();
  } else {
    StartStep();
  }
  return h;
}

void DecoderModel::Cancel(int handle) {
  if (handle < 0 || static_cast<size_t>(handle) >= seqs_.size()) return;
  seqs_[handle].cancelled = true;
  if (stepping_) CutRun();
}

double DecoderModel::RunTime(int64_t m) const {
  // Step j (0-based) of the run has run_context_ + j * B context tokens.
  const double b = static_cast<double>(run_batch_), k = static_cast<double>(m);
  return k * p_->StepWork(run_batch_, run_context_) +
         p_->decoder.step_context_s * b * k * (k - 1) / 2;
}

void DecoderModel::CutRun() {
  if (run_steps_ <= 1 || cpu_->cores() > 0) return;  // a single step ends where it ends
  const double now = q_->now();
  int64_t m = 1;  // the step in progress ends the run
  while (m < run_steps_ && run_start_ + RunTime(m) < now) ++m;
  if (m == run_steps_) return;
  run_steps_ = m;
  q_->At(run_start_ + RunTime(m), this, 0, ++generation_);
}

void DecoderModel::KeepWarm(int64_t session, const WarmTurn& turn) {
  const double now = q_->now();
  if (sessions_.Erase(static_cast<uint64_t>(session))) warm_->Dropped(session, index_, now);
  warm_->Held(session, index_, turn.length, now);
  // Put evicts to the budget (this session too when it alone is over it: the callback drops it).
  sessions_.Put(static_cast<uint64_t>(session), static_cast<uint64_t>(StateBytes(turn.length)), turn, now);
}

void DecoderModel::StartStep() {
  if (stepping_ || running_.empty()) return;
  batch_.swap(running_);
  running_.clear();
  int64_t context = 0, steps = INT64_MAX;
  size_t live = 0;
  for (int h : batch_) {
    const Seq& s = seqs_[h];
    if (s.cancelled) {  // freed before the step, as the batch loop does
      running_bytes_ -= StateBytes(s.context);
      free_.push_back(h);
      continue;
    }
    batch_[live++] = h;
    context += s.context;
    steps = std::min(steps, s.left);
  }
  batch_.resize(live);
  if (batch_.empty()) return;
  stepping_ = true;
  run_start_ = q_->now();
  run_context_ = context;
  run_batch_ = static_cast<int64_t>(batch_.size());
  if (cpu_->cores() > 0) {
    run_steps_ = 1;
    cpu_->Run(p_->StepWork(static_cast<int64_t>(batch_.size()), context), this, 0, ++generation_);
  } else {
    run_steps_ = std::max<int64_t>(1, steps);
    q_->At(run_start_ + RunTime(run_steps_), this, 0, ++generation_);
  }
}

void DecoderModel::OnEvent(uint32_t, uint64_t generation, uint64_t) {
  if (generation != generation_) return;  // a run cut short: its new end comes later
  // stepping_ stays set while the tokens go out: a sequence that joins meanwhile waits for the
  // next step, as one admitted during a step does.
  std::vector<int> batch;
  batch.swap(batch_);
  const int64_t steps = run_steps_;
  steps_ += static_cast<uint64_t>(steps);
  if (cpu_->cores() <= 0) planned_work_s_ += RunTime(steps);
  step_ends_.resize(static_cast<size_t>(steps));
  for (int64_t m = 1; m <= steps; ++m) step_ends_[static_cast<size_t>(m - 1)] = run_start_ + RunTime(m);
  if (cpu_->cores() > 0) step_ends_.back() = q_->now();  // a shared host's step took what it took
  for (int h : batch) {
    Seq& s = seqs_[h];
    if (s.cancelled) {
      running_bytes_ -= StateBytes(s.context);
      free_.push_back(h);
      continue;
    }
    const uint64_t request = s.request;
    s.context += steps;
    s.left -= steps;
    running_bytes_ += p_->decoder.state_bytes_per_token * static_cast<double>(steps);
    const bool done = s.left <= 0;
    if (done) {
      running_bytes_ -= StateBytes(s.context);
      free_.push_back(h);
    } else {
      running_.push_back(h);
    }
    // The listener may Join or Cancel (seqs_ may grow: no reference kept across the calls).
    for (int64_t m = 0; m < steps; ++m) listener_->OnToken(index_, request, step_ends_[static_cast<size_t>(m)]);
  }
  batch.clear();
  if (batch_.empty()) batch_.swap(batch);
  stepping_ = false;
  StartStep();
}

}  // namespace ds41::sim
