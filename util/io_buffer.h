// Buffers for O_DIRECT transfers. Those of 2 MiB or more are mappings of their own on transparent
// huge pages where the kernel allows them (THP "always" or "madvise"): a device is handed one
// scatter-gather segment per physically contiguous run, so a 4 MiB write from 4 KiB pages is 1,024
// segments, split into several requests at the device's segment limit (254 for this VM's
// virtio-blk), and from 2 MiB pages it is two. Here that raised a 4 MiB sequential write from
// 1.7-2.2 to 2.4-2.7 GB/s and a read from 1.3-1.6 to 2.7 GB/s, and kept the write at 2.5 GB/s beside
// a loopback TCP stream that halved it from 4 KiB pages. Smaller ones are 4 KiB-aligned heap memory.
// (Huge pages from the heap were no good: recycled heap memory is zeroed again page by page.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace ds41 {

struct IoBufferFree {
  size_t mapped = 0;  // 0: heap memory
  void operator()(uint8_t* p) const;
};
using IoBuffer = std::unique_ptr<uint8_t[], IoBufferFree>;

// At least `bytes`, aligned for O_DIRECT. Throws std::bad_alloc when memory is short.
IoBuffer AllocateIoBuffer(size_t bytes);

}  // namespace ds41
