#include "serving/node_setup.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <iostream>
#include <thread>

#include "engine/kernels/kernels.h"
#include "engine/kernels/matmul.h"
#include "serving/node_runtime.h"

namespace ds41 {

void AddNodeFlags(CLI::App& app, NodeFlags* f) {
  app.add_option("--model", f->model_dir, "checkpoint folder")->required()->envname("DS41_MODEL");
  app.add_option("--cache", f->cache, "cache_service shard addresses, comma separated (empty: no cache)")
      ->envname("DS41_CACHE_SHARDS");
  app.add_option("--cache-ack-log", f->cache_ack_log,
                 "append every cache unit a shard acknowledged to this file (an audit for tests; docs/chaos.md)")
      ->envname("DS41_CACHE_ACK_LOG");
  app.add_option("--threads", f->threads, "compute threads (0: all cores)")->envname("DS41_THREADS");
  app.add_option("--store-io-threads", f->io_threads,
                 "threads for blocking store calls: unit puts in the background (half of them at most) and the "
                 "cache client's shard fan-out")
      ->check(CLI::Range(2, 256))
      ->envname("DS41_STORE_IO_THREADS");
  AddTlsFlags(app, &f->tls);
  app.add_option_function<std::string>(
         "--weight-tiles",
         [f](const std::string& s) {
           auto t = ParseWeightTiles(s);
           if (!t.ok()) throw CLI::ValidationError("--weight-tiles", t.status().message());
           f->model.weight_tiles = *t;
         },
         "tile-major weight copy for the matmuls: file (beside the checkpoint or in --weight-tiles-dir, built "
         "once), memory, off")
      ->envname("DS41_WEIGHT_TILES");
  app.add_option("--weight-tiles-dir", f->model.pack_dir, "folder of the tile-major weight file (default: the checkpoint's)")
      ->envname("DS41_WEIGHT_TILES_DIR");
  app.add_option("--shutdown-grace-seconds", f->shutdown_grace_s,
                 "on SIGTERM, how long in-flight calls may finish before they are cancelled (keep it below the "
                 "pod's terminationGracePeriodSeconds)")
      ->check(CLI::Range(0, 3600))
      ->envname("DS41_SHUTDOWN_GRACE_SECONDS");
}

int SetUpNode(const std::string& name, const NodeFlags& f, NodeSetup* out) {
  if (Status st = InstallTransportSecurity(f.tls); !st.ok()) {
    std::cerr << st.ToString() << "\n";
    return 2;
  }
  auto model = Model::Open(f.model_dir, f.model);
  if (!model.ok()) {
    std::cerr << model.status().ToString() << "\n";
    return 1;
  }
  std::cerr << name << ": tile-major weights " << (*model)->packed().summary() << "\n";
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  out->compute = std::make_unique<ThreadPool>(f.threads > 0 ? f.threads : cores, ThreadPool::Idle::kSpinThenSleep);
  out->requests = std::make_unique<ThreadPool>(1 + cores, ThreadPool::Idle::kSleep, (name.substr(0, 7) + "-req").c_str());
  out->io = std::make_unique<ThreadPool>(f.io_threads, ThreadPool::Idle::kSleep, (name.substr(0, 7) + "-io").c_str());
  auto cache = ConnectCache(f.cache, f.cache_ack_log, out->io.get());
  if (!cache.ok()) {
    std::cerr << "--cache: " << cache.status().ToString() << "\n";
    return 2;
  }
  out->model = std::move(*model);
  out->cache = std::move(*cache);
  std::cerr << name << ": matmul kernels " << ChooseMatmulKernels(out->compute.get()) << "; FP4 numerics "
            << Fp4NumericsName(Fp4NumericsInUse())
            << (Fp4NumericsInUse() == Fp4Numerics::kGrid ? " (" + Fp4GridKernels() + ")" : std::string())
            << ", fingerprint " << out->model->fingerprint().substr(0, 12) << "\n";
  return 0;
}

}  // namespace ds41
