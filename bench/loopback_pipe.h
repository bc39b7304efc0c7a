// The least work a TCP service does to store bytes on this machine and send them back, in calls
// that return once their bytes are on the device, with its clients on the same CPUs: the reference
// (not a proven bound) that cache_bench's transport rows are compared with, beside the disk's
// bandwidth. Each client sends a call's units over a loopback connection and waits for one
// acknowledgement byte; the server receives them straight into 4 MiB I/O buffers and appends each
// to one file with O_DIRECT (when full and at the call's end) from a second thread, so that
// receiving overlaps writing, and acknowledges the call once its last bytes are written. Gets are
// the reverse: a request byte per call, O_DIRECT reads overlapping the sends. There is no framing,
// checksum or index per unit, and no copy besides the kernel's.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ds41 {

struct PipeThroughput {
  bool ok = false;  // false: a socket or file call failed, or a verified get differed (no figures then)
  double put_bps = 0, get_bps = 0;
  double put_cores = 0, get_cores = 0;  // CPU seconds of this process per second
};

struct PipeRun {
  int clients = 1;
  int units_per_client = 0;  // units[(c + i) % units.size()] for i below this, for client c
  int put_call_units = 1;    // units per put call
  int get_call_units = 1;    // units per get call
  // Each client compares what it gets back with what it put (a test's check: it costs the clients
  // a pass over the bytes, so a measurement leaves it off).
  bool verify = false;
};

// `run.clients` connections, each putting its units (64 per writev) in calls, then getting them back
// in calls. The put is timed until its bytes are on disk (fdatasync); the get reads with O_DIRECT,
// so from the device. The file is made in `dir` and removed.
PipeThroughput MeasureLoopbackPipe(const std::string& dir, const PipeRun& run, const std::vector<std::string_view>& units);

}  // namespace ds41
