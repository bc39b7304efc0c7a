#include "util/io_buffer.h"

#include <sys/mman.h>

#include <cstdlib>
#include <new>

namespace ds41 {
namespace {

constexpr size_t kPage = 4096;
constexpr size_t kHugePage = size_t{2} << 20;

}  // namespace

void IoBufferFree::operator()(uint8_t* p) const {
  if (mapped > 0) {
    munmap(p, mapped);
  } else {
    std::free(p);
  }
}

IoBuffer AllocateIoBuffer(size_t bytes) {
  if (bytes < kHugePage) {
    void* p = nullptr;
    if (posix_memalign(&p, kPage, bytes) != 0) throw std::bad_alloc();
    return IoBuffer(static_cast<uint8_t*>(p), IoBufferFree{});
  }
  // A mapping with a huge page's worth of slack, cut down to the aligned whole huge pages inside.
  const size_t size = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  void* m = mmap(nullptr, size + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) throw std::bad_alloc();
  const auto base = reinterpret_cast<uintptr_t>(m);
  const uintptr_t aligned = (base + kHugePage - 1) / kHugePage * kHugePage;
  if (aligned > base) munmap(m, aligned - base);
  if (const uintptr_t end = base + size + kHugePage; end > aligned + size)
    munmap(reinterpret_cast<void*>(aligned + size), end - (aligned + size));
  auto* p = reinterpret_cast<uint8_t*>(aligned);
  // Advice only: where THP is off or memory too fragmented, the pages stay 4 KiB.
  madvise(p, size, MADV_HUGEPAGE);
  return IoBuffer(p, IoBufferFree{size});
}

}  // namespace ds41
