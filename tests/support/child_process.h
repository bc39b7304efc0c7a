// Real node binaries as child processes for integration tests: spawned with a pipe on stdout, ready
// once they print their "... ready ..." line (which carries the ports they chose).
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

namespace ds41::testing {

class ChildProcess {
 public:
  // Starts argv[0] with the arguments and waits (up to timeout_s) for a stdout line containing
  // `ready_marker`; that line is returned by ready_line().
  ChildProcess(const std::vector<std::string>& argv, const std::string& ready_marker, int timeout_s = 60);
  ~ChildProcess();  // SIGKILL if still running

  bool ready() const { return ready_; }
  const std::string& ready_line() const { return line_; }
  pid_t pid() const { return pid_; }
  // key=value fields of the ready line (e.g. "grpc" -> "127.0.0.1:4711").
  std::map<std::string, std::string> fields() const;
  // Sends `sig` and waits for the exit; returns the wait status.
  int Kill(int sig);

 private:
  pid_t pid_ = -1;
  int out_fd_ = -1;
  bool ready_ = false;
  std::string line_;
};

// Directory of the build's binaries (set by CMake as DS41_BINARY_DIR).
std::string BinaryDir();

// Minimal HTTP/1.1 GET against host:port; returns the body ("" on failure).
std::string HttpGet(const std::string& host_port, const std::string& path);

// The value of one series in a /metrics page, named with its labels as the page writes them
// (`name{label="v"}`); -1 when absent.
double Metric(const std::string& page, const std::string& series);

// A process's thread count (/proc/<pid>/status), -1 when it cannot be read.
int ThreadsOf(pid_t pid);

}  // namespace ds41::testing
