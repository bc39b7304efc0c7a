#include "util/process.h"

#include <pthread.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>

namespace ds41 {
namespace {
sigset_t TermSet() {
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGINT);
  sigaddset(&s, SIGTERM);
  return s;
}
}  // namespace

void BlockTerminationSignals() {
  sigset_t s = TermSet();
  pthread_sigmask(SIG_BLOCK, &s, nullptr);
}

int WaitForTerminationSignal() {
  sigset_t s = TermSet();
  int sig = 0;
  sigwait(&s, &sig);
  return sig;
}

void NameThisThread(const char* name) {
  char cut[16] = {};
  std::strncpy(cut, name, sizeof(cut) - 1);
  pthread_setname_np(pthread_self(), cut);
}

StatusOr<uint64_t> ParseByteSize(const std::string& s) {
  if (s.empty()) return InvalidArgumentError("empty byte size");
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || v < 0) return InvalidArgumentError("bad byte size \"" + s + "\"");
  std::string unit(end);
  double mult = 1;
  if (unit == "" || unit == "B") mult = 1;
  else if (unit == "K" || unit == "KiB" || unit == "k") mult = 1024.0;
  else if (unit == "M" || unit == "MiB" || unit == "m") mult = 1048576.0;
  else if (unit == "G" || unit == "GiB" || unit == "g") mult = 1073741824.0;
  else if (unit == "T" || unit == "TiB" || unit == "t") mult = 1099511627776.0;
  else return InvalidArgumentError("bad byte size unit in \"" + s + "\"");
  return static_cast<uint64_t>(v * mult);
}

double ProcStatus(int pid, const std::string& field) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  const std::string key = field + ":";
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(key, 0) == 0) return std::stod(line.substr(key.size()));
  return -1;
}

uint64_t ResidentBytes() {
  std::ifstream in("/proc/self/statm");
  uint64_t size = 0, pages = 0;
  in >> size >> pages;
  return pages * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

}  // namespace ds41
