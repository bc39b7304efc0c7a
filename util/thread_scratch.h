// ThreadScratch<T>: a per-thread scratch vector that only grows (declare it `thread_local`). A
// forward pass refills such buffers row after row, which costs less than fresh zero-filled vectors.
// But each lives as long as its thread, so a node's many request threads, which run a pass only now
// and then (a replay, an image tower), would each keep their high-water mark, and the heap would
// creep up for hours as more of them reach it. Such a thread calls ReleaseThreadScratch() when its
// pass is over (ScratchReleaser); the compute pool's workers keep theirs.
//
// Not shared between threads by construction; ReleaseThreadScratch touches only the caller's.
#pragma once

#include <cstddef>
#include <vector>

namespace ds41 {

// The link every ThreadScratch puts in its thread's list.
class ScratchLink {
 public:
  ScratchLink(const ScratchLink&) = delete;
  ScratchLink& operator=(const ScratchLink&) = delete;

 protected:
  using Bytes = size_t (*)(const ScratchLink*);
  using Release = void (*)(ScratchLink*);
  ScratchLink(Bytes bytes, Release release);
  ~ScratchLink();

 private:
  friend void ReleaseThreadScratch();
  friend size_t ThreadScratchBytes();
  Bytes bytes_;
  Release release_;
  ScratchLink* next_;
};

template <typename T>
class ThreadScratch : public std::vector<T>, private ScratchLink {
 public:
  ThreadScratch() : ScratchLink(&ThreadScratch::Held, &ThreadScratch::Free) {}

 private:
  static size_t Held(const ScratchLink* link) { return static_cast<const ThreadScratch*>(link)->capacity() * sizeof(T); }
  static void Free(ScratchLink* link) { std::vector<T>().swap(*static_cast<ThreadScratch*>(link)); }
};

// Frees every ThreadScratch of the calling thread (they grow again on their next use).
void ReleaseThreadScratch();
// What the calling thread's ThreadScratch buffers hold, in bytes.
size_t ThreadScratchBytes();

// Calls ReleaseThreadScratch when the scope ends, on every path out of a request's work.
class ScratchReleaser {
 public:
  ScratchReleaser() = default;
  ~ScratchReleaser() { ReleaseThreadScratch(); }
  ScratchReleaser(const ScratchReleaser&) = delete;
  ScratchReleaser& operator=(const ScratchReleaser&) = delete;
};

}  // namespace ds41
