#include "util/process_metrics.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <string>

namespace ds41 {
namespace {

std::map<std::string, double> Scrape() {
  std::map<std::string, double> out;
  for (const auto& f : ProcessMetrics().Collect()) {
    const auto& m = f.metric.at(0);
    out[f.name] = f.type == prometheus::MetricType::Counter ? m.counter.value : m.gauge.value;
  }
  return out;
}

TEST(ProcessMetricsTest, ReportsTheProcessAsItIs) {
  auto before = Scrape();
  for (const char* name : {"process_cpu_seconds_total", "process_threads", "process_start_time_seconds",
                           "process_virtual_memory_bytes", "process_resident_memory_bytes", "process_open_fds",
                           "process_max_fds", "ds41_heap_in_use_bytes", "ds41_heap_free_bytes"})
    EXPECT_TRUE(before.count(name)) << name;
  EXPECT_GT(before["process_resident_memory_bytes"], 1 << 20);
  EXPECT_GE(before["process_threads"], 1);
  EXPECT_GT(before["process_start_time_seconds"], 1.6e9);  // after 2020: boot time was added

  const int fd = open("/proc/self/stat", O_RDONLY);
  ASSERT_GE(fd, 0);
  constexpr size_t kBlock = size_t{48} << 20;
  char* block = static_cast<char*>(malloc(kBlock));
  ASSERT_NE(block, nullptr);
  std::memset(block, 1, kBlock);
  auto during = Scrape();
  EXPECT_EQ(during["process_open_fds"], before["process_open_fds"] + 1);
  EXPECT_GE(during["ds41_heap_in_use_bytes"], before["ds41_heap_in_use_bytes"] + kBlock);
  EXPECT_GE(during["process_resident_memory_bytes"], before["process_resident_memory_bytes"] + kBlock / 2);
  free(block);
  close(fd);
  auto after = Scrape();
  EXPECT_LT(after["ds41_heap_in_use_bytes"], during["ds41_heap_in_use_bytes"] - kBlock / 2);
  EXPECT_EQ(after["process_open_fds"], before["process_open_fds"]);
}

}  // namespace
}  // namespace ds41
