// CPU time of this process, and of some of its threads, for the benchmarks' "cores" figures.
#pragma once

#include <string>

namespace ds41 {

// The process's user + system CPU seconds so far.
double ProcessCpuSeconds();

// CPU seconds so far of this process's live threads whose names start with `prefix` (schedstat's
// nanoseconds on a CPU: finer than the 10 ms ticks of /proc's stat).
double ThreadsCpuSeconds(const std::string& prefix);

}  // namespace ds41
