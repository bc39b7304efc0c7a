// decoder_node: decoder replay over the last window positions, then continuous-batching decode.
// Thin: options -> model -> DecoderCore -> DecoderService -> wait.
#include <CLI/CLI.hpp>
#include <iostream>

#include "decoder_node/decoder_service.h"
#include "grammar/tokenizer_masker.h"
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
  CLI::App app{"ds41 decoder_node"};
  ds41::NodeFlags node;
  std::string listen = "127.0.0.1:7600", metrics = "127.0.0.1:9600", experts = "0", sessions = "8G", swa_pool = "2G";
  int max_running = 64;
  int64_t session_ttl = 900, swa_ttl = 900;
  bool speculative = false;
  ds41::AddNodeFlags(app, &node);
  app.add_option("--listen", listen, "gRPC address")->envname("DS41_DECODER_LISTEN");
  app.add_option("--metrics-listen", metrics, "Prometheus /metrics address")->envname("DS41_DECODER_METRICS_LISTEN");
  app.add_option("--expert-cache", experts, "byte budget of the routed-expert cache (0: read experts from the mapping)")
      ->envname("DS41_EXPERT_CACHE_BYTES");
  app.add_option("--session-bytes", sessions, "bytes of warm sessions kept")->envname("DS41_SESSION_BYTES");
  app.add_option("--session-ttl-seconds", session_ttl, "how long a finished session stays warm")->envname("DS41_SESSION_TTL_SECONDS");
  app.add_option("--swa-pool", swa_pool, "bytes of SWA states kept")->envname("DS41_SWA_POOL_BYTES");
  app.add_option("--swa-ttl-seconds", swa_ttl, "how long SWA states are kept")->envname("DS41_SWA_TTL_SECONDS");
  app.add_option("--max-running", max_running, "sequences decoding at once")->check(CLI::Range(1, 4096))
      ->envname("DS41_MAX_RUNNING");
  app.add_flag("--speculative", speculative,
               "speculative decoding with the model's DSpark layers: draft, verify the k the scheduler picks")
      ->envname("DS41_SPECULATIVE");
  CLI11_PARSE(app, argc, argv);
  auto expert_bytes = ds41::ParseByteSize(experts);
  auto session_bytes = ds41::ParseByteSize(sessions);
  auto pool_bytes = ds41::ParseByteSize(swa_pool);
  if (!expert_bytes.ok() || !session_bytes.ok() || !pool_bytes.ok()) {
    std::cerr << "bad byte size option\n";
    return 2;
  }
  ds41::NodeSetup set;
  if (int rc = ds41::SetUpNode("decoder_node", node, &set); rc != 0) return rc;
  const std::string fp = set.model->fingerprint();
  ds41::NodeRuntime rt;
  ds41::NodeMetrics node_metrics(*rt.registry, "decoder");
  ds41::SpeculationMetrics spec_metrics(*rt.registry);
  ds41::NodeClient encoders(std::make_shared<ds41::ChannelSet>(), fp);
  ds41::DecoderOptions o;
  o.expert_cache_bytes = *expert_bytes;
  o.session_bytes = *session_bytes;
  o.session_ttl_ms = session_ttl * 1000;
  o.swa_pool_bytes = *pool_bytes;
  o.swa_ttl_ms = swa_ttl * 1000;
  o.max_running = max_running;
  o.speculative = speculative;
  // Constrained decoding masks the model's vocabulary by its tokenizer's bytes (built in ~0.1 s at
  // the release's 129,280 ids).
  std::unique_ptr<ds41::grammar::TokenMasker> masker;
  if (auto tok = ds41::Tokenizer::Load(node.model_dir + "/tokenizer.json"); tok.ok()) {
    masker = ds41::grammar::MaskerForTokenizer(*tok, set.model->config().vocab_size);
    o.masker = masker.get();
  } else {
    std::cerr << "decoder_node: no tokenizer (" << tok.status().ToString()
              << "): requests with a response format will be refused\n";
  }
  ds41::DecoderCore core(
      *set.model, set.cache.get(),
      ds41::PrefillThrough(&encoders), o, &node_metrics, set.executors(), &spec_metrics);
  // Two workers start the streams' writes, off the decode loop.
  ds41::ThreadPool writers(3, ds41::ThreadPool::Idle::kSleep, "decoder-write");
  ds41::DecoderService service(&core, fp, &node_metrics, &writers);
  ds41::SwaStateService swa_service(core.swa_pool(), fp);
  return rt.Run("decoder_node", listen, metrics, {&service, &swa_service}, "fingerprint=" + fp,
                node.shutdown_grace_s);
}
