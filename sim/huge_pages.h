// AdviseHugePages: asks the kernel to back a large, not yet touched table with 2 MiB pages. The
// store's tables reach gigabytes and are probed at random: with 4 KiB pages nearly every probe
// misses the TLB, and every page's first touch is a fault. A hint only (a no-op off Linux or where
// transparent huge pages are off); contents and results are the same either way.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace ds41::sim {

inline void AdviseHugePages(void* p, size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + bytes) & ~(kHuge - 1);
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
#else
  (void)p;
  (void)bytes;
#endif
}

}  // namespace ds41::sim
