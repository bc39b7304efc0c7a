#include "util/cancel_token.h"

#include <atomic>
#include <limits>

namespace ds41 {
namespace {

// Nanoseconds since the epoch from which cancels are the shutdown's (max: not shutting down).
std::atomic<int64_t> shutdown_from{std::numeric_limits<int64_t>::max()};

}  // namespace

const char* CancelReasonName(CancelReason r) {
  switch (r) {
    case CancelReason::kClient: return "client";
    case CancelReason::kDeadline: return "deadline";
    case CancelReason::kShutdown: return "shutdown";
  }
  return "client";
}

void MarkShuttingDown(std::chrono::system_clock::time_point cancels_from) {
  shutdown_from.store(std::chrono::duration_cast<std::chrono::nanoseconds>(cancels_from.time_since_epoch()).count());
}

CancelReason CancelReasonNow(std::chrono::system_clock::time_point deadline) {
  const auto now = std::chrono::system_clock::now();
  // gRPC cancels at the shutdown deadline, a few milliseconds either side of our clock read.
  const auto slack = std::chrono::milliseconds(100);
  if (std::chrono::duration_cast<std::chrono::nanoseconds>((now + slack).time_since_epoch()).count() >= shutdown_from.load()) {
    return CancelReason::kShutdown;
  }
  // A caller up the chain whose own copy of the same deadline fired cancels a little before ours
  // would: a cancel within 50 ms of the deadline is the deadline's.
  return now + std::chrono::milliseconds(50) >= deadline ? CancelReason::kDeadline : CancelReason::kClient;
}

void CancelToken::Cancel(CancelReason reason) {
  MutexLock l(&mu_);
  if (cancelled_) return;
  cancelled_ = true;
  reason_ = reason;
  for (auto& [id, fn] : callbacks_) fn();
  callbacks_.clear();
}

bool CancelToken::cancelled() const {
  MutexLock l(&mu_);
  return cancelled_;
}

CancelReason CancelToken::reason() const {
  MutexLock l(&mu_);
  return reason_;
}

CancelToken::Attachment CancelToken::OnCancel(std::function<void()> fn, bool* attached) {
  MutexLock l(&mu_);
  if (attached) *attached = !cancelled_;
  if (cancelled_) {
    fn();
    return {};
  }
  const uint64_t id = next_id_++;
  callbacks_.emplace(id, std::move(fn));
  return {this, id};
}

CancelToken::Attachment::~Attachment() {
  if (!token_) return;
  MutexLock l(&token_->mu_);
  token_->callbacks_.erase(id_);
}

}  // namespace ds41
