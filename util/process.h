// Process helpers: termination signals, thread names and human byte sizes.
#pragma once

#include <cstdint>
#include <string>

#include "util/status.h"

namespace ds41 {

// Blocks SIGINT/SIGTERM in this thread and every thread started after; call first in main().
void BlockTerminationSignals();
// Waits until SIGINT or SIGTERM arrives; returns the signal number.
int WaitForTerminationSignal();

// Names the calling thread (the first 15 characters of `name`), as top -H, perf and gdb show it.
void NameThisThread(const char* name);

// This process's resident memory (/proc/self/statm), in bytes.
uint64_t ResidentBytes();

// A numeric field of /proc/<pid>/status ("Threads", "VmRSS" and "VmHWM" in KiB, ...); -1 when it
// cannot be read.
double ProcStatus(int pid, const std::string& field);

// "64G", "512M", "1048576" -> bytes.
StatusOr<uint64_t> ParseByteSize(const std::string& s);

}  // namespace ds41
