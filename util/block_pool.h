// Fixed-size I/O buffers (io_buffer.h: 2 MiB and up are mappings of their own, apart from malloc's
// heap), reused most recently given first; a block left idle for longer than `idle_release` goes back
// to the kernel at the pool's next call. Big transient buffers in malloc's arenas interleave with the
// small objects that outlive them, so the arenas grow with every burst and keep its pages
// (docs/benchmarks-history.md, "Tenth soak"); a pool's resident blocks follow what was in use over the last
// `idle_release`, and meanwhile none is faulted in twice.
//
// Thread-safe. Blocks may be given back after the pool is gone only if it outlives them (hold it by
// shared_ptr where the last holder is unknown).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "util/io_buffer.h"
#include "util/mutex.h"
#include "util/thread_annotations.h"

namespace ds41 {

class BlockPool {
 public:
  using Clock = std::chrono::steady_clock;
  struct Stats {
    int64_t mapped_bytes = 0;  // blocks out and idle
    int64_t idle_bytes = 0;    // of those, idle
    uint64_t allocated = 0;    // blocks allocated since the start
    uint64_t released = 0;     // idle blocks given back to the kernel
  };

  BlockPool(size_t block_bytes, Clock::duration idle_release);
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  size_t block_bytes() const { return block_bytes_; }
  // A block of block_bytes(), its contents undefined. Throws std::bad_alloc when memory is short.
  IoBuffer Take() DS41_EXCLUDES(mu_);
  void Give(IoBuffer block) DS41_EXCLUDES(mu_);
  // Frees the blocks idle for longer than `idle_release` (Take and Give do too).
  void ReleaseIdle() DS41_EXCLUDES(mu_);
  Stats stats() const DS41_EXCLUDES(mu_);

 private:
  struct Idle {
    IoBuffer block;
    Clock::time_point since;
  };
  // Moves the expired blocks into `out`, to be freed outside the lock.
  void TakeExpired(Clock::time_point now, std::vector<IoBuffer>& out) DS41_REQUIRES(mu_);

  const size_t block_bytes_;
  const Clock::duration idle_release_;
  mutable Mutex mu_;
  std::vector<Idle> idle_ DS41_GUARDED_BY(mu_);  // oldest first; Take takes the last
  int64_t out_ DS41_GUARDED_BY(mu_) = 0;         // blocks taken and not given back
  uint64_t allocated_ DS41_GUARDED_BY(mu_) = 0, released_ DS41_GUARDED_BY(mu_) = 0;
};

}  // namespace ds41
