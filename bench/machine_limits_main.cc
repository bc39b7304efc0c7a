// machine_limits: this host's bandwidth and arithmetic peaks on the engine's threads (the limits every
// engine_bench ratio is taken against), as one line a script can read and a description.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <thread>

#include "bench/machine_limits.h"
#include "util/thread_pool.h"

int main(int argc, char** argv) {
  CLI::App app{"machine_limits: this host's honest bandwidth and arithmetic peaks"};
  int threads = static_cast<int>(std::thread::hardware_concurrency()), runs = 5;
  int64_t mib = 1536;
  app.add_option("--threads", threads, "threads (default: every core)");
  app.add_option("--mib", mib, "MiB of the bandwidth buffers (the triad's three arrays together; far above the caches)");
  app.add_option("--runs", runs, "timed runs per bandwidth figure (best kept)");
  CLI11_PARSE(app, argc, argv);
  ds41::ThreadPool pool(threads, ds41::ThreadPool::Idle::kSpinThenSleep);
  const ds41::MachineLimits m = ds41::MeasureMachineLimits(&pool, mib << 20, runs);
  std::printf("limits threads=%d read_gbs=%.2f triad_gbs=%.2f triad_plain_gbs=%.2f reading_gbs=%.2f fma_gflops=%.1f bf16dot_gflops=%.1f int8dot_gops=%.1f "
              "amx_bf16_gflops=%.1f amx_int8_gops=%.1f\n",
              threads, m.read_bytes_per_s / 1e9, m.triad_stream_bytes_per_s / 1e9, m.triad_plain_bytes_per_s / 1e9,
              m.read_bandwidth() / 1e9, m.fma_flops / 1e9, m.bf16_dot_flops / 1e9,
              m.int8_dot_ops / 1e9, m.amx_bf16_flops / 1e9, m.amx_int8_ops / 1e9);
  std::printf("%s\n", m.Describe().c_str());
  return 0;
}
