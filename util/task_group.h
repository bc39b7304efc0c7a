// TaskGroup: one owner's tasks on a pool it does not own (the process's pools are built in main and
// shared), so that the owner can wait for its own before it goes, which draining the pool did when
// each class had a private one.
//
// Thread-safe. Schedule may be called from any thread, also from one of the group's own tasks.
#pragma once

#include <cstdint>
#include <utility>

#include "util/mutex.h"
#include "util/thread_annotations.h"
#include "util/thread_pool.h"

namespace ds41 {

class TaskGroup {
 public:
  // `pool` (null: tasks run inline, on the caller's thread) outlives the group.
  explicit TaskGroup(ThreadPool* pool) : pool_(pool) {}
  ~TaskGroup() { Wait(); }
  TaskGroup(const TaskGroup&) = delete;
  TaskGroup& operator=(const TaskGroup&) = delete;

  // Runs `f` on the pool (ThreadPool::Schedule: an exception it throws is reported and dropped;
  // inline without a pool, where it reaches the caller), counted until it has returned and what it
  // captured is destroyed. A task must not own its group (it would wait for itself).
  template <typename F>
  void Schedule(F&& f) {
    Hold();
    auto task = [this, f = std::forward<F>(f)]() mutable {
      const Held release(this, Held::kAdopt);
      // What the task captured goes before it counts as done, so that after Wait nothing of it is
      // left on a pool thread (a last reference it held must not outlive its owner's Wait).
      auto run = std::move(f);
      run();
    };
    if (pool_ == nullptr) {
      task();
    } else {
      pool_->Schedule(std::move(task));
    }
  }

  // One Hold() for as long as it lives.
  class Held {
   public:
    explicit Held(TaskGroup* group) : group_(group) { group_->Hold(); }
    ~Held() { group_->Release(); }
    Held(const Held&) = delete;
    Held& operator=(const Held&) = delete;

   private:
    friend class TaskGroup;
    enum Adopt { kAdopt };
    Held(TaskGroup* group, Adopt) : group_(group) {}  // takes over a Hold() already counted
    TaskGroup* const group_;
  };

  // Counts something outstanding that is not a task (a call whose answer will schedule one), so
  // Wait also waits for it; each Hold is matched by one Release (or use Held).
  void Hold() {
    MutexLock l(&mu_);
    ++outstanding_;
  }
  void Release() {
    MutexLock l(&mu_);
    if (--outstanding_ == 0) idle_.NotifyAll();
  }

  // Until every task scheduled (and everything held) so far, and what they schedule, has finished.
  // Not from one of the group's own tasks (it would wait for itself).
  void Wait() {
    MutexLock l(&mu_);
    idle_.Wait(&mu_, [this]() DS41_REQUIRES(mu_) { return outstanding_ == 0; });
  }

  ThreadPool* pool() const { return pool_; }

 private:
  ThreadPool* const pool_;
  Mutex mu_;
  CondVar idle_;
  int64_t outstanding_ DS41_GUARDED_BY(mu_) = 0;
};

}  // namespace ds41
