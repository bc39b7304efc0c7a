#include "sim/decoder_model.h"

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
  StartStep();
  return h;
}

void DecoderModel::Cancel(int handle) {
  if (handle >= 0 && static_cast<size_t>(handle) < seqs_.size()) seqs_[handle].cancelled = true;
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
  int64_t context = 0;
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
  }
  batch_.resize(live);
  if (batch_.empty()) return;
  stepping_ = true;
  ++steps_;
  cpu_->Run(p_->StepWork(static_cast<int64_t>(batch_.size()), context), this, 0);
}

void DecoderModel::OnEvent(uint32_t, uint64_t, uint64_t) {
  // stepping_ stays set while the tokens go out: a sequence that joins meanwhile waits for the
  // next step, as one admitted during a step does.
  std::vector<int> batch;
  batch.swap(batch_);
  for (int h : batch) {
    Seq& s = seqs_[h];
    if (s.cancelled) {
      running_bytes_ -= StateBytes(s.context);
      free_.push_back(h);
      continue;
    }
    ++s.context;
    --s.left;
    running_bytes_ += p_->decoder.state_bytes_per_token;
    const uint64_t request = s.request;
    if (s.left <= 0) {
      running_bytes_ -= StateBytes(s.context);
      free_.push_back(h);
    } else {
      running_.push_back(h);
    }
    listener_->OnToken(index_, request);  // may Join or Cancel: seqs_ may grow, so no reference kept
  }
  batch.clear();
  if (batch_.empty()) batch_.swap(batch);
  stepping_ = false;
  StartStep();
}

}  // namespace ds41::sim
