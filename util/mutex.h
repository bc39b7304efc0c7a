// Mutex, MutexLock, ReleasableMutexLock, MutexUnlock, CondVar: std::mutex and std::condition_variable
// with Clang's capability annotations (util/thread_annotations.h), so that a Clang build with
// -Wthread-safety (scripts/thread_safety_check.sh) proves every DS41_GUARDED_BY member is touched,
// and every DS41_REQUIRES function called, with its lock held. std::mutex carries no annotations, so
// guarding by one checks nothing; these are the same locks at the same cost, with the contract
// spelled out for the compiler. The project's members use these; a function-local static may stay
// std::mutex.
//
//   mutable Mutex mu_;
//   int n_ DS41_GUARDED_BY(mu_) = 0;
//   CondVar cv_;
//   void Inc() { MutexLock l(&mu_); ++n_; cv_.NotifyAll(); }
//   void AwaitTen() { MutexLock l(&mu_); while (n_ < 10) cv_.Wait(&mu_); }
//
// A lambda is checked as a function of its own, which does not know the lock is held: one that
// touches guarded members says so, e.g. a wait's predicate:
//   cv_.WaitFor(&mu_, timeout, [this]() DS41_REQUIRES(mu_) { return n_ >= 10; });
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "util/thread_annotations.h"

namespace ds41 {

class DS41_CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() DS41_ACQUIRE() { mu_.lock(); }
  void Unlock() DS41_RELEASE() { mu_.unlock(); }
  [[nodiscard]] bool TryLock() DS41_TRY_ACQUIRE(true) { return mu_.try_lock(); }
  // Tells the analysis the caller holds this lock where it cannot see so (code reached through a
  // std::function the holder runs). Checks nothing at run time.
  void AssertHeld() const DS41_ASSERT_CAPABILITY() {}

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds `mu` for its scope, like std::lock_guard.
class DS41_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) DS41_ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() DS41_RELEASE() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

// Holds `mu` until Release() or the end of its scope, whichever comes first: for a section that
// ends by running something without the lock (a callback that may call back in) on some paths.
class DS41_SCOPED_CAPABILITY ReleasableMutexLock {
 public:
  explicit ReleasableMutexLock(Mutex* mu) DS41_ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~ReleasableMutexLock() DS41_RELEASE() {
    if (mu_ != nullptr) mu_->Unlock();
  }
  ReleasableMutexLock(const ReleasableMutexLock&) = delete;
  ReleasableMutexLock& operator=(const ReleasableMutexLock&) = delete;

  void Release() DS41_RELEASE() {
    mu_->Unlock();
    mu_ = nullptr;
  }

 private:
  Mutex* mu_;
};

// The inverse: lets go of `mu`, which the caller holds, for its scope and takes it again at the end
// (also when an exception leaves the scope, so the holder's own release stays balanced): a blocking
// call or a copy in the middle of a locked section.
class DS41_SCOPED_CAPABILITY MutexUnlock {
 public:
  explicit MutexUnlock(Mutex* mu) DS41_RELEASE(mu) : mu_(mu) { mu_->Unlock(); }
  ~MutexUnlock() DS41_RELEASE() { mu_->Lock(); }  // (Clang's spelling for a scoped unlock)
  MutexUnlock(const MutexUnlock&) = delete;
  MutexUnlock& operator=(const MutexUnlock&) = delete;

 private:
  Mutex* const mu_;
};

// A condition variable for Mutex: every wait is called with the mutex held (by a MutexLock or a
// ReleasableMutexLock), lets go of it while blocked and holds it again when it returns, as
// std::condition_variable does with a std::unique_lock. Waits may wake spuriously; the predicate
// forms loop until the predicate holds (std's definition), calling it with the lock held.
// The predicate forms are not analysed inside: the analysis cannot tie `mu` to the lock a
// predicate's DS41_REQUIRES names; the caller is still checked to hold `mu`, the predicate's body
// to touch only what that lock guards.
class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  void Wait(Mutex* mu) DS41_REQUIRES(mu) {
    std::unique_lock<std::mutex> l(mu->mu_, std::adopt_lock);
    cv_.wait(l);
    l.release();  // the caller's lock object still owns the mutex
  }
  template <class Predicate>
  void Wait(Mutex* mu, Predicate pred) DS41_REQUIRES(mu) DS41_NO_THREAD_SAFETY_ANALYSIS {
    while (!pred()) Wait(mu);
  }

  // False when `deadline` passed (the wait timed out), true when woken before it.
  template <class Clock, class Duration>
  bool WaitUntil(Mutex* mu, const std::chrono::time_point<Clock, Duration>& deadline) DS41_REQUIRES(mu) {
    std::unique_lock<std::mutex> l(mu->mu_, std::adopt_lock);
    const std::cv_status s = cv_.wait_until(l, deadline);
    l.release();
    return s == std::cv_status::no_timeout;
  }
  // pred() at the end: false only when the deadline passed with the predicate still false.
  template <class Clock, class Duration, class Predicate>
  bool WaitUntil(Mutex* mu, const std::chrono::time_point<Clock, Duration>& deadline, Predicate pred)
      DS41_REQUIRES(mu) DS41_NO_THREAD_SAFETY_ANALYSIS {
    while (!pred()) {
      if (!WaitUntil(mu, deadline)) return pred();
    }
    return true;
  }

  template <class Rep, class Period>
  bool WaitFor(Mutex* mu, const std::chrono::duration<Rep, Period>& timeout) DS41_REQUIRES(mu) {
    return WaitUntil(mu, std::chrono::steady_clock::now() +
                             std::chrono::ceil<std::chrono::steady_clock::duration>(timeout));
  }
  template <class Rep, class Period, class Predicate>
  bool WaitFor(Mutex* mu, const std::chrono::duration<Rep, Period>& timeout, Predicate pred)
      DS41_REQUIRES(mu) DS41_NO_THREAD_SAFETY_ANALYSIS {
    return WaitUntil(mu, std::chrono::steady_clock::now() +
                             std::chrono::ceil<std::chrono::steady_clock::duration>(timeout),
                     std::move(pred));
  }

  void NotifyOne() noexcept { cv_.notify_one(); }
  void NotifyAll() noexcept { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace ds41
