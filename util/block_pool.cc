#include "util/block_pool.h"

#include <algorithm>
#include <utility>

namespace ds41 {

BlockPool::BlockPool(size_t block_bytes, Clock::duration idle_release)
    : block_bytes_(block_bytes), idle_release_(idle_release) {}

void BlockPool::TakeExpired(Clock::time_point now, std::vector<IoBuffer>& out) {
  auto fresh = std::find_if(idle_.begin(), idle_.end(), [&](const Idle& i) { return now - i.since <= idle_release_; });
  for (auto it = idle_.begin(); it != fresh; ++it) out.push_back(std::move(it->block));
  released_ += static_cast<uint64_t>(fresh - idle_.begin());
  idle_.erase(idle_.begin(), fresh);
}

IoBuffer BlockPool::Take() {
  std::vector<IoBuffer> expired;
  {
    MutexLock l(&mu_);
    TakeExpired(Clock::now(), expired);
    ++out_;
    if (!idle_.empty()) {
      IoBuffer b = std::move(idle_.back().block);
      idle_.pop_back();
      return b;
    }
    ++allocated_;
  }
  try {
    return AllocateIoBuffer(block_bytes_);
  } catch (...) {
    MutexLock l(&mu_);
    --out_;
    --allocated_;
    throw;
  }
}

void BlockPool::Give(IoBuffer block) {
  std::vector<IoBuffer> expired;
  MutexLock l(&mu_);
  const Clock::time_point now = Clock::now();
  --out_;
  idle_.push_back({std::move(block), now});
  TakeExpired(now, expired);
}  // (the lock goes first: the expired blocks are freed outside it)

void BlockPool::ReleaseIdle() {
  std::vector<IoBuffer> expired;
  MutexLock l(&mu_);
  TakeExpired(Clock::now(), expired);
}

BlockPool::Stats BlockPool::stats() const {
  MutexLock l(&mu_);
  const auto bytes = static_cast<int64_t>(block_bytes_);
  return {.mapped_bytes = (out_ + static_cast<int64_t>(idle_.size())) * bytes,
          .idle_bytes = static_cast<int64_t>(idle_.size()) * bytes,
          .allocated = allocated_,
          .released = released_};
}

}  // namespace ds41
