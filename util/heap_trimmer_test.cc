#include "util/heap_trimmer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "util/malloc_tuning.h"
#include "util/process.h"

namespace ds41 {
namespace {

// Freed memory the nodes' malloc settings keep resident (a chunk still in use above it stops the
// heap's top from shrinking) goes back to the kernel at the next trim.
TEST(HeapTrimmerTest, FreedMemoryKeptByTheHeapIsReturned) {
  TuneMallocForLargeBuffers();
  setenv("DS41_HEAP_TRIM_SECONDS", "1", 1);
  constexpr size_t kChunk = 16 << 10, kChunks = 4096;  // 64 MiB
  std::vector<char*> chunks;
  for (size_t i = 0; i < kChunks; ++i) {
    chunks.push_back(static_cast<char*>(malloc(kChunk)));
    std::memset(chunks.back(), 1, kChunk);
  }
  char* pin = static_cast<char*>(malloc(kChunk));
  std::memset(pin, 1, kChunk);
  for (char* c : chunks) free(c);
  const uint64_t kept = ResidentBytes();
  StartHeapTrimmer(std::chrono::seconds(60));  // the environment's 1 s wins
  const HeapTrimStats before = HeapTrimmed();
  for (int i = 0; i < 50 && HeapTrimmed().trims < before.trims + 2; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_GE(HeapTrimmed().trims, before.trims + 1);
  EXPECT_LT(ResidentBytes() + (32 << 20), kept) << "the freed 64 MiB stayed resident";
  EXPECT_GE(HeapTrimmed().released_bytes, uint64_t{32} << 20);
  free(pin);
}

// A burst's memory in a thread's own arena goes back once freed: malloc_trim cannot return the top
// of a thread arena's heap, so only the trim threshold (malloc_tuning.h) keeps it from staying
// resident for good (the cache's step after each burst in an hour's soak).
TEST(HeapTrimmerTest, FreedTopOfAThreadArenaIsReturned) {
  TuneMallocForLargeBuffers();
  setenv("DS41_HEAP_TRIM_SECONDS", "1", 1);
  StartHeapTrimmer(std::chrono::seconds(60));
  constexpr size_t kChunk = 1 << 20, kChunks = 40;  // 40 MiB, as the data path's read chunks come
  bool ran = false;
  uint64_t peak = 0;
  // A new thread takes an arena of its own while there are fewer than the cap, else it shares one,
  // which may be the main heap's: try threads until one is in a mapped (thread) arena.
  for (int t = 0; t < 16 && !ran; ++t) {
    std::thread([&] {
      // The main arena's heap lies below the program break; thread arenas' heaps are mapped apart.
      const std::unique_ptr<char[]> probe(new char[64]);
      if (probe.get() < sbrk(0)) return;
      ran = true;
      std::vector<char*> chunks;
      for (size_t i = 0; i < kChunks; ++i) {
        chunks.push_back(static_cast<char*>(malloc(kChunk)));
        std::memset(chunks.back(), 1, kChunk);
      }
      peak = ResidentBytes();
      for (char* c : chunks) free(c);
    }).join();
  }
  ASSERT_TRUE(ran) << "no thread got an arena of its own";
  const HeapTrimStats before = HeapTrimmed();
  for (int i = 0; i < 50 && HeapTrimmed().trims < before.trims + 2; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_GE(HeapTrimmed().trims, before.trims + 1);
  EXPECT_LT(ResidentBytes() + (32 << 20), peak) << "the freed 40 MiB stayed resident in the thread's arena";
}

}  // namespace
}  // namespace ds41
