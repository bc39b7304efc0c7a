#include "util/heap_trimmer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>
#include <vector>

#include "util/malloc_tuning.h"

namespace ds41 {
namespace {

uint64_t Resident() {
  std::ifstream in("/proc/self/statm");
  uint64_t size = 0, pages = 0;
  in >> size >> pages;
  return pages * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

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
  const uint64_t kept = Resident();
  StartHeapTrimmer(std::chrono::seconds(60));  // the environment's 1 s wins
  const HeapTrimStats before = HeapTrimmed();
  for (int i = 0; i < 50 && HeapTrimmed().trims < before.trims + 2; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_GE(HeapTrimmed().trims, before.trims + 1);
  EXPECT_LT(Resident() + (32 << 20), kept) << "the freed 64 MiB stayed resident";
  EXPECT_GE(HeapTrimmed().released_bytes, uint64_t{32} << 20);
  free(pin);
}

}  // namespace
}  // namespace ds41
