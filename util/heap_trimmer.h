// Returns the heap's free pages to the kernel every so often. The nodes keep freed buffers in the
// heap on purpose (malloc_tuning.h: no page faults per unit), but what the arenas of ~100 threads
// keep free grows with fragmentation long after the work that freed it; a trim every half minute
// bounds resident memory by the heap in use without giving back the buffers of the current burst.
// It cannot return the free top of a thread arena's heap: the trim threshold does (malloc_tuning.h).
#pragma once

#include <chrono>
#include <cstdint>

namespace ds41 {

struct HeapTrimStats {
  uint64_t trims = 0;           // malloc_trim calls
  uint64_t released_bytes = 0;  // resident memory that went down across them
};

// Starts (once per process) a thread that calls malloc_trim every `interval`; the environment's
// DS41_HEAP_TRIM_SECONDS overrides it (0: never).
void StartHeapTrimmer(std::chrono::seconds interval = std::chrono::seconds(30));
HeapTrimStats HeapTrimmed();

}  // namespace ds41
