#include "bench/cpu_time.h"

#include <sys/resource.h>

#include <cstdint>
#include <filesystem>
#include <fstream>

namespace ds41 {

double ProcessCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto s = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6; };
  return s(u.ru_utime) + s(u.ru_stime);
}

double ThreadsCpuSeconds(const std::string& prefix) {
  double s = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    std::ifstream comm(e.path() / "comm");
    std::string name;
    if (!std::getline(comm, name) || name.rfind(prefix, 0) != 0) continue;
    std::ifstream sched(e.path() / "schedstat");
    uint64_t ns = 0;
    if (sched >> ns) s += static_cast<double>(ns) * 1e-9;
  }
  return s;
}

}  // namespace ds41
