#include "util/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "util/mutex.h"
#include "util/process.h"

namespace ds41 {

ThreadPool::ThreadPool(int threads, Idle idle, const char* name) : idle_(idle) {
  for (int i = 1; i < threads; ++i)
    workers_.emplace_back([this, label = std::string(name != nullptr ? name : "")] {
      if (!label.empty()) NameThisThread(label.c_str());  // (a copy: the workers start after the caller's string may be gone)
      WorkerLoop();
    });
}

ThreadPool::~ThreadPool() {
  {
    MutexLock l(&mu_);
    stop_ = true;
  }
  cv_.NotifyAll();
  for (auto& t : workers_) t.join();
}

namespace {

// How long a kSpinThenSleep thread polls for work before it sleeps.
constexpr auto kSpin = std::chrono::microseconds(100);

// Polls `ready` until it returns true or kSpin has passed; returns its last answer.
template <typename F>
bool SpinFor(F ready) {
  const auto deadline = std::chrono::steady_clock::now() + kSpin;
  for (int i = 0;; ++i) {
    if (ready()) return true;
    if ((i & 63) == 63 && std::chrono::steady_clock::now() > deadline) return false;
#if defined(__x86_64__)
    __builtin_ia32_pause();
#endif
  }
}

}  // namespace

void ThreadPool::Run(std::function<void()> f) {
  if (workers_.empty()) {
    f();
    return;
  }
  Enqueue(std::move(f));
}

void ThreadPool::ReportFailedTask(const char* what) {
  std::fprintf(stderr, "thread pool: a scheduled task failed%s%s\n", what != nullptr ? ": " : "", what != nullptr ? what : "");
}

void ThreadPool::Enqueue(std::function<void()> f) {
  {
    MutexLock l(&mu_);
    queue_.push_back(std::move(f));
    queued_.fetch_add(1, std::memory_order_release);
  }
  cv_.NotifyOne();
}

void ThreadPool::WorkerLoop() {
  for (;;) {
    if (idle_ == Idle::kSpinThenSleep) SpinFor([this] { return queued_.load(std::memory_order_acquire) > 0; });
    std::function<void()> f;
    {
      MutexLock l(&mu_);
      cv_.Wait(&mu_, [this]() DS41_REQUIRES(mu_) { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and drained
      f = std::move(queue_.front());
      queue_.pop_front();
      queued_.fetch_sub(1, std::memory_order_relaxed);
    }
    f();
  }
}

void ThreadPool::ParallelFor(int64_t n, const std::function<void(int64_t)>& fn) {
  if (n <= 0) return;
  if (n == 1 || workers_.empty()) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  struct Job {
    std::atomic<int64_t> next{0};
    std::atomic<int64_t> done{0};
    Mutex mu;
    CondVar cv;
  };
  auto job = std::make_shared<Job>();
  auto run = [job, n, &fn] {
    int64_t i;
    int64_t finished = 0;
    while ((i = job->next.fetch_add(1)) < n) {
      fn(i);
      ++finished;
    }
    if (finished > 0 && job->done.fetch_add(finished) + finished == n) {
      MutexLock l(&job->mu);
      job->cv.NotifyAll();
    }
  };
  const int64_t helpers = std::min<int64_t>(static_cast<int64_t>(workers_.size()), n - 1);
  for (int64_t h = 0; h < helpers; ++h) Enqueue(run);
  run();
  if (idle_ == Idle::kSpinThenSleep && SpinFor([&] { return job->done.load(std::memory_order_acquire) == n; })) return;
  MutexLock l(&job->mu);
  job->cv.Wait(&job->mu, [&] { return job->done.load() == n; });
}

void ThreadPool::ParallelRanges(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  // A few ranges per thread, so a thread that is descheduled for a while does not hold up the rest.
  const int64_t parts = std::min<int64_t>(4 * threads(), n / std::max<int64_t>(grain, 1));
  if (parts <= 1 || workers_.empty()) {
    fn(0, n);
    return;
  }
  ParallelFor(parts, [&](int64_t i) { fn(n * i / parts, n * (i + 1) / parts); });
}

ThreadPool& ThreadPool::Default() {
  static ThreadPool* pool = [] {
    int n = static_cast<int>(std::thread::hardware_concurrency());
    if (const char* e = std::getenv("DS41_THREADS")) n = std::atoi(e);
    return new ThreadPool(n > 0 ? n : 1, Idle::kSpinThenSleep);
  }();
  return *pool;
}

}  // namespace ds41
