// Clock: the time source of TTLs and LRU order, injectable so tests can move time.
//
// Thread-safe: every implementation's NowMs may be called from any thread (one clock is shared by
// a whole process).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace ds41 {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual int64_t NowMs() const = 0;  // milliseconds since the Unix epoch
};

class SystemClock final : public Clock {
 public:
  int64_t NowMs() const override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
  static SystemClock* Get() {
    static SystemClock c;
    return &c;
  }
};

// Thread-safe manual clock for tests (an atomic).
class ManualClock final : public Clock {
 public:
  explicit ManualClock(int64_t start_ms = 1'700'000'000'000) : now_(start_ms) {}
  int64_t NowMs() const override { return now_.load(); }
  void AdvanceMs(int64_t d) { now_ += d; }

 private:
  std::atomic<int64_t> now_;
};

// Seconds elapsed on the steady clock since `t` (latency metrics).
inline double SecondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace ds41
