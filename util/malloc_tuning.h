// Keeps freed large buffers in the heap instead of returning them to the kernel: nodes that move
// ~57 KB units (and engines with big activations) otherwise page-fault on every fresh mapping,
// which under virtualization costs more than the copies themselves (measured in cache_bench).
#pragma once

#include <malloc.h>

namespace ds41 {

inline void TuneMallocForLargeBuffers() {
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
}

}  // namespace ds41
