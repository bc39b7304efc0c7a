// The pools a node's cores run on. The binary builds them once (serving/node_setup.h) and they
// outlive the cores: no class makes a pool of its own, so a node's thread count is fixed at start
// and does not follow its load.
#pragma once

#include "util/thread_pool.h"

namespace ds41 {

struct NodeExecutors {
  ThreadPool* compute = nullptr;   // the engine's kernels (spins between bursts; one thread per core)
  // Each request's own work between kernels: admissions, replays, prefix reads and SWA state (one
  // thread per core: a request holds one only while it computes or reads, never while it waits for
  // another node). A pool without workers runs it inline.
  ThreadPool* requests = nullptr;
  // Blocking store calls: unit puts in the background (at most half of its threads) and the cache
  // client's shard fan-out. Null: inline, on the caller's thread.
  ThreadPool* io = nullptr;
};

}  // namespace ds41
