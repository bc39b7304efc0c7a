#include "util/heap_trimmer.h"

#include <malloc.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

#include "util/process.h"

namespace ds41 {
namespace {

std::atomic<uint64_t> g_trims{0}, g_released{0};

}  // namespace

void StartHeapTrimmer(std::chrono::seconds interval) {
  static std::once_flag once;
  std::call_once(once, [interval] {
    std::chrono::seconds every = interval;
    if (const char* env = std::getenv("DS41_HEAP_TRIM_SECONDS"); env != nullptr && *env != '\0')
      every = std::chrono::seconds(std::strtol(env, nullptr, 10));
    if (every.count() <= 0) return;
    std::thread([every] {
      while (true) {
        std::this_thread::sleep_for(every);
        const uint64_t before = ResidentBytes();
        malloc_trim(0);
        const uint64_t after = ResidentBytes();
        g_trims.fetch_add(1, std::memory_order_relaxed);
        if (after < before) g_released.fetch_add(before - after, std::memory_order_relaxed);
      }
    }).detach();
  });
}

HeapTrimStats HeapTrimmed() {
  return {g_trims.load(std::memory_order_relaxed), g_released.load(std::memory_order_relaxed)};
}

}  // namespace ds41
