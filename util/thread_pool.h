// ThreadPool: a fixed set of worker threads shared by every kernel and I/O fan-out of a process
// (no per-call thread creation).
//
// Thread-safe: Submit and ParallelFor may be called from any thread, concurrently. ParallelFor's
// calling thread takes part in the work, so it completes even when every worker is busy. mu_ guards
// the queue and the stop flag; workers_ is fixed after construction.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <thread>
#include <vector>

#include "util/mutex.h"
#include "util/thread_annotations.h"

namespace ds41 {

class ThreadPool {
 public:
  // What a thread does when it runs out of work. Compute pools poll for ~100 us first: kernels come
  // in bursts (a decode step is ~100 matmuls with microseconds of serial work between them) and
  // waking a sleeping thread costs tens of microseconds on a VM, as much as a small matmul. I/O
  // pools sleep at once, leaving the CPU to whoever has work.
  enum class Idle { kSleep, kSpinThenSleep };

  // `threads` = workers + the caller of ParallelFor; 1 means no workers (everything inline).
  // `name` (up to 15 characters) names the workers, as top -H, perf and gdb show them.
  explicit ThreadPool(int threads, Idle idle = Idle::kSleep, const char* name = nullptr);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Runs `f` on a worker (inline when there are none); the future carries its result.
  template <typename F>
  auto Submit(F&& f) -> std::future<decltype(f())> {
    using R = decltype(f());
    auto task = std::make_shared<std::packaged_task<R()>>(std::forward<F>(f));
    std::future<R> fut = task->get_future();
    Run([task] { (*task)(); });  // (the task keeps what f throws, for the future)
    return fut;
  }

  // Runs `f` on a worker (inline when there are none), for work that reports back by itself: no
  // future to set (whose one-time initialisation costs a futex call per task). `f` may be move-only.
  // An exception it throws is written to stderr and dropped: the worker (and process) go on.
  template <typename F>
  void Schedule(F&& f) {
    // (Held by shared_ptr: std::function wants a copyable callable, and this is one allocation as
    // a large lambda inside std::function would be.)
    Run([p = std::make_shared<std::decay_t<F>>(std::forward<F>(f))] {
      try {
        (*p)();
      } catch (const std::exception& e) {
        ReportFailedTask(e.what());
      } catch (...) {
        ReportFailedTask(nullptr);
      }
    });
  }

  // fn(i) for every i in [0, n); returns when all calls have returned.
  void ParallelFor(int64_t n, const std::function<void(int64_t)>& fn);

  // fn(begin, end) over consecutive ranges that cover [0, n), each at least `grain` long (one range,
  // inline, when n < 2 * grain or there are no workers); returns when all calls have returned.
  void ParallelRanges(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

  // A process-wide default compute pool (kSpinThenSleep) sized by DS41_THREADS or the hardware.
  static ThreadPool& Default();

 private:
  void Run(std::function<void()> f);  // on a worker, or inline without workers
  static void ReportFailedTask(const char* what);  // to stderr (`what`: the exception's, or null)
  void Enqueue(std::function<void()> f) DS41_EXCLUDES(mu_);
  void WorkerLoop() DS41_EXCLUDES(mu_);

  std::vector<std::thread> workers_;
  Mutex mu_;
  CondVar cv_;
  std::deque<std::function<void()>> queue_ DS41_GUARDED_BY(mu_);
  const Idle idle_;
  std::atomic<int64_t> queued_{0};  // queue_.size(), readable without the lock (for spinning)
  bool stop_ DS41_GUARDED_BY(mu_) = false;
};

// pool->ParallelRanges, or fn(0, n) on the calling thread when `pool` is null.
inline void ForRanges(ThreadPool* pool, int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (pool == nullptr) {
    if (n > 0) fn(0, n);
    return;
  }
  pool->ParallelRanges(n, grain, fn);
}

}  // namespace ds41
