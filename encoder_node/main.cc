// encoder_node: encoder layers plus the CED source's projection over uncached prompt tokens.
// Thin: options -> model -> EncoderCore -> EncoderService -> wait.
#include <CLI/CLI.hpp>
#include <iostream>

#include "encoder_node/encoder_service.h"
#include "rpc/transport_security.h"
#include "serving/model_flags.h"
#include "serving/node_runtime.h"
#include "util/malloc_tuning.h"
#include "util/process.h"

int main(int argc, char** argv) {
  ds41::BlockTerminationSignals();
  ds41::TuneMallocForLargeBuffers();
  CLI::App app{"ds41 encoder_node"};
  std::string model_dir, listen = "127.0.0.1:7500", metrics = "127.0.0.1:9500", cache, swa_pool = "2G";
  int threads = 0;
  int64_t step_tokens = 512, swa_ttl = 600;
  app.add_option("--model", model_dir, "checkpoint folder")->required()->envname("DS41_MODEL");
  app.add_option("--listen", listen, "gRPC address")->envname("DS41_ENCODER_LISTEN");
  app.add_option("--metrics-listen", metrics, "Prometheus /metrics address")->envname("DS41_ENCODER_METRICS_LISTEN");
  app.add_option("--cache", cache, "cache_service shard addresses, comma separated (empty: no cache)")->envname("DS41_CACHE_SHARDS");
  app.add_option("--threads", threads, "compute threads (0: all cores)")->envname("DS41_THREADS");
  app.add_option("--step-tokens", step_tokens, "token budget of one shared encoder step")->check(CLI::Range(1, 1 << 20))
      ->envname("DS41_ENCODER_STEP_TOKENS");
  app.add_option("--swa-pool", swa_pool, "bytes of SWA states kept (K/M/G)")->envname("DS41_SWA_POOL_BYTES");
  app.add_option("--swa-ttl-seconds", swa_ttl, "how long SWA states are kept")->envname("DS41_SWA_TTL_SECONDS");
  ds41::TlsOptions tls;
  ds41::AddTlsFlags(app, &tls);
  ds41::ModelOptions model_options;
  ds41::AddModelFlags(app, &model_options);
  CLI11_PARSE(app, argc, argv);
  if (ds41::Status st = ds41::InstallTransportSecurity(tls); !st.ok()) {
    std::cerr << st.ToString() << "\n";
    return 2;
  }
  auto pool_bytes = ds41::ParseByteSize(swa_pool);
  if (!pool_bytes.ok()) {
    std::cerr << "--swa-pool: " << pool_bytes.status().message() << "\n";
    return 2;
  }
  auto model = ds41::OpenModelVerbose("encoder_node", model_dir, model_options);
  if (!model.ok()) {
    std::cerr << model.status().ToString() << "\n";
    return 1;
  }
  const std::string fp = (*model)->fingerprint();
  auto connected = ds41::ConnectCache(cache);
  if (!connected.ok()) {
    std::cerr << "--cache: " << connected.status().ToString() << "\n";
    return 2;
  }
  std::unique_ptr<ds41::CacheClient> cache_client = std::move(*connected);
  ds41::ThreadPool compute(threads > 0 ? threads : static_cast<int>(std::thread::hardware_concurrency()));
  ds41::NodeRuntime rt;
  ds41::NodeMetrics node_metrics(*rt.registry, "encoder");
  auto channels = std::make_shared<ds41::ChannelSet>();
  ds41::EncoderOptions eo;
  eo.step_tokens = step_tokens;
  eo.swa_pool_bytes = *pool_bytes;
  eo.swa_ttl_ms = swa_ttl * 1000;
  ds41::EncoderCore core(**model, cache_client.get(), ds41::MakeGrpcSwaFetcher(channels, fp), eo, &node_metrics, &compute);
  ds41::EncoderService service(&core, fp, &node_metrics);
  return rt.Run("encoder_node", listen, metrics, {&service}, "fingerprint=" + fp);
}
