// encoder_node: encoder layers plus the CED source's projection over uncached prompt tokens.
// Thin: options -> model -> EncoderCore -> EncoderService -> wait.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <iostream>
#include <thread>

#include "encoder_node/encoder_service.h"
#include "node_client/node_client.h"
#include "serving/node_runtime.h"
#include "serving/node_setup.h"
#include "serving/swa_state_service.h"
#include "util/heap_trimmer.h"
#include "util/malloc_tuning.h"
#include "util/process.h"

int main(int argc, char** argv) {
  ds41::BlockTerminationSignals();
  ds41::TuneMallocForLargeBuffers();
  ds41::StartHeapTrimmer();
  CLI::App app{"ds41 encoder_node"};
  ds41::NodeFlags node;
  std::string listen = "127.0.0.1:7500", metrics = "127.0.0.1:9500", swa_pool = "2G";
  int64_t step_tokens = 512, swa_ttl = 600;
  ds41::AddNodeFlags(app, &node);
  app.add_option("--listen", listen, "gRPC address")->envname("DS41_ENCODER_LISTEN");
  app.add_option("--metrics-listen", metrics, "Prometheus /metrics address")->envname("DS41_ENCODER_METRICS_LISTEN");
  app.add_option("--step-tokens", step_tokens, "token budget of one shared encoder step")->check(CLI::Range(1, 1 << 20))
      ->envname("DS41_ENCODER_STEP_TOKENS");
  app.add_option("--swa-pool", swa_pool, "bytes of SWA states kept (K/M/G)")->envname("DS41_SWA_POOL_BYTES");
  app.add_option("--swa-ttl-seconds", swa_ttl, "how long SWA states are kept")->envname("DS41_SWA_TTL_SECONDS");
  CLI11_PARSE(app, argc, argv);
  auto pool_bytes = ds41::ParseByteSize(swa_pool);
  if (!pool_bytes.ok()) {
    std::cerr << "--swa-pool: " << pool_bytes.status().message() << "\n";
    return 2;
  }
  ds41::NodeSetup set;
  if (int rc = ds41::SetUpNode("encoder_node", node, &set); rc != 0) return rc;
  const std::string fp = set.model->fingerprint();
  ds41::NodeRuntime rt;
  ds41::NodeMetrics node_metrics(*rt.registry, "encoder");
  ds41::NodeClient peers(std::make_shared<ds41::ChannelSet>(), fp);
  ds41::EncoderOptions eo;
  eo.step_tokens = step_tokens;
  eo.swa_pool_bytes = *pool_bytes;
  eo.swa_ttl_ms = swa_ttl * 1000;
  ds41::EncoderCore core(
      *set.model, set.cache.get(),
      [&peers](const std::string& peer, const ds41::UnitKey& ns, const ds41::UnitKey& key, int64_t position) {
        return peers.FetchSwa(peer, ns, key, position);
      },
      eo, &node_metrics, set.executors());
  ds41::EncoderService service(&core, fp, &node_metrics);
  ds41::SwaStateService swa_service(core.swa_pool(), fp);
  return rt.Run("encoder_node", listen, metrics, {&service, &swa_service}, "fingerprint=" + fp,
                node.shutdown_grace_s);
}
