// The nodes' allocator settings, applied first thing in main (before any thread allocates).
#pragma once

#include <malloc.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

namespace ds41 {

inline constexpr int kTrimThresholdBytes = 16 << 20;

inline void TuneMallocForLargeBuffers() {
  // Keep freed large buffers in the heap instead of returning them to the kernel: nodes that move
  // ~57 KB units (and engines with big activations) otherwise page-fault on every fresh mapping,
  // which under virtualization costs more than the copies themselves (measured in cache_bench).
  // The periodic trim (heap_trimmer.h) gives back the free chunks that stay.
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  // The top of a thread arena's heap goes back only as a free leaves more than this there:
  // malloc_trim returns the main heap's top and free chunks in bins, never a thread arena's top,
  // so with a high threshold each arena stayed resident at the highest it ever reached and the
  // cache's memory rose for good with each burst (docs/benchmarks-history.md, "Tenth soak"). 16 MiB is
  // four of the data path's 4 MiB read chunks. MALLOC_TRIM_THRESHOLD_ in the environment wins.
  if (std::getenv("MALLOC_TRIM_THRESHOLD_") == nullptr) mallopt(M_TRIM_THRESHOLD, kTrimThresholdBytes);
  // One arena per hardware thread instead of glibc's eight: a node's ~100 request threads spread
  // over that many arenas, each keeping the free memory of its own peak, and what the heap kept
  // grew for as long as a soak ran with the memory in use flat (docs/benchmarks.md, "Soak").
  // MALLOC_ARENA_MAX in the environment wins.
  // glibc's per-thread caches (tcache: up to 7 freed blocks of each small size, ~240 KB a thread)
  // fill over hours across a node's ~100 threads, outside any budget; only GLIBC_TUNABLES, read
  // before main, turns them off, so the chart and scripts/run.sh set it (tcache_count=0: the
  // capacity measured the same with and without, docs/benchmarks-history.md "Ninth soak").
  if (std::getenv("MALLOC_ARENA_MAX") == nullptr)
    mallopt(M_ARENA_MAX, static_cast<int>(std::max(2u, std::thread::hardware_concurrency())));
}

}  // namespace ds41
