#include "util/process_metrics.h"

#include <dirent.h>
#include <malloc.h>
#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "util/heap_trimmer.h"

namespace ds41 {
namespace {

prometheus::MetricFamily One(const char* name, const char* help, prometheus::MetricType type, double value) {
  prometheus::MetricFamily f;
  f.name = name;
  f.help = help;
  f.type = type;
  prometheus::ClientMetric m;
  if (type == prometheus::MetricType::Counter)
    m.counter.value = value;
  else
    m.gauge.value = value;
  f.metric.push_back(m);
  return f;
}

int CountOpenFiles() {
  DIR* d = opendir("/proc/self/fd");
  if (d == nullptr) return -1;
  int n = 0;
  while (const dirent* e = readdir(d)) n += e->d_name[0] != '.';
  closedir(d);
  return n - 1;  // the directory stream's own descriptor
}

// /proc/self/stat fields after the command name (which may hold spaces, so split after its ')').
std::vector<std::string> StatFields() {
  std::ifstream in("/proc/self/stat");
  std::string line;
  std::getline(in, line);
  std::vector<std::string> out;
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return out;
  std::istringstream rest(line.substr(close + 2));
  for (std::string f; rest >> f;) out.push_back(f);
  return out;  // out[0] is field 3 (state)
}

double BootTimeSeconds() {
  std::ifstream in("/proc/stat");
  for (std::string key; in >> key;) {
    if (key == "btime") {
      double t = 0;
      in >> t;
      return t;
    }
    in.ignore(1 << 16, '\n');
  }
  return 0;
}

}  // namespace

std::vector<prometheus::MetricFamily> ProcessMetrics::Collect() const {
  using prometheus::MetricType;
  std::vector<prometheus::MetricFamily> out;
  const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  const std::vector<std::string> f = StatFields();
  if (f.size() > 21) {  // fields 14/15 utime/stime, 20 threads, 22 starttime, 23 vsize, 24 rss
    out.push_back(One("process_cpu_seconds_total", "User and system CPU time spent, seconds", MetricType::Counter,
                      (std::stod(f[11]) + std::stod(f[12])) / tick));
    out.push_back(One("process_threads", "Threads of the process", MetricType::Gauge, std::stod(f[17])));
    out.push_back(One("process_start_time_seconds", "Start time of the process since the Unix epoch, seconds",
                      MetricType::Gauge, BootTimeSeconds() + std::stod(f[19]) / tick));
    out.push_back(One("process_virtual_memory_bytes", "Virtual memory size, bytes", MetricType::Gauge, std::stod(f[20])));
    out.push_back(One("process_resident_memory_bytes", "Resident memory size, bytes", MetricType::Gauge,
                      std::stod(f[21]) * page));
  }
  out.push_back(One("process_open_fds", "Open file descriptors", MetricType::Gauge, CountOpenFiles()));
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0)
    out.push_back(One("process_max_fds", "Limit on open file descriptors", MetricType::Gauge, static_cast<double>(lim.rlim_cur)));
  const struct mallinfo2 mi = mallinfo2();
  out.push_back(One("ds41_heap_in_use_bytes", "Heap bytes allocated and not freed (glibc: arenas plus large mappings)",
                    MetricType::Gauge, static_cast<double>(mi.uordblks + mi.hblkhd)));
  out.push_back(One("ds41_heap_free_bytes",
                    "Heap bytes freed and kept by the allocator for reuse (resident until a trim returns their pages)",
                    MetricType::Gauge, static_cast<double>(mi.fordblks)));
  const HeapTrimStats trimmed = HeapTrimmed();
  out.push_back(One("ds41_heap_trims_total", "Periodic malloc_trim calls (heap_trimmer.h)", MetricType::Counter,
                    static_cast<double>(trimmed.trims)));
  out.push_back(One("ds41_heap_trimmed_bytes_total", "Resident memory the periodic trims returned to the kernel",
                    MetricType::Counter, static_cast<double>(trimmed.released_bytes)));
  return out;
}

std::shared_ptr<ProcessMetrics> SharedProcessMetrics() {
  static const std::shared_ptr<ProcessMetrics> instance = std::make_shared<ProcessMetrics>();
  return instance;
}

StatusOr<std::unique_ptr<prometheus::Exposer>> ServeMetrics(const std::string& listen,
                                                            const std::shared_ptr<prometheus::Collectable>& registry) {
  std::unique_ptr<prometheus::Exposer> exposer;
  try {
    exposer = std::make_unique<prometheus::Exposer>(std::vector<std::string>{
        "listening_ports", listen, "num_threads", "2", "max_request_size", std::to_string(kMetricsMaxRequestBytes),
        "request_timeout_ms", "10000"});
  } catch (const std::exception& e) {
    return UnavailableError("cannot serve metrics on " + listen + ": " + e.what());
  }
  exposer->RegisterCollectable(registry);
  exposer->RegisterCollectable(SharedProcessMetrics());
  return exposer;
}

}  // namespace ds41
