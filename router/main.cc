// router: the OpenAI-compatible front door (HTTP and gRPC), tokenizer and chat format, placement.
// Thin: options -> model config + tokenizer -> node table, cache client, RouterCore -> servers -> wait.
#include <CLI/CLI.hpp>
#include <iostream>

#include "engine/config/fingerprint.h"
#include "router/http_front.h"
#include "router/rate_profile.h"
#include "router/reply_records.h"
#include "router/router_service.h"
#include "rpc/server.h"
#include "rpc/transport_security.h"
#include "util/heap_trimmer.h"
#include "util/split_list.h"
#include "util/process.h"

int main(int argc, char** argv) {
  ds41::BlockTerminationSignals();
  ds41::StartHeapTrimmer();
  CLI::App app{"ds41 router"};
  std::string model_dir, listen = "127.0.0.1:8000", grpc_listen = "127.0.0.1:50050", encoders, decoders, cache, cache_ack_log, api_keys, admin_token_file, metrics_listen,
              model_id = "deepseek-v4.1-flash", max_body = "8M", placement = "cost", cost_profile;
  bool reply_splice = true;
  double max_queue_s = ds41::RouterOptions{}.max_queue_seconds;  // one default, RouterOptions's
  int unit_tokens = 64, max_running = 256, io_threads = 2, workers = 4, poll_ms = 1000, header_timeout_ms = 10000,
      request_timeout_s = 600, grace_s = 20, max_migrations = 2, max_sessions = 100000, max_connections = 10000;
  app.add_option("--model", model_dir, "checkpoint folder (config.json, tokenizer.json)")->required()->envname("DS41_MODEL");
  app.add_option("--listen", listen, "HTTP address (OpenAI API, /health, /livez, and /metrics unless --metrics-listen)")
      ->envname("DS41_ROUTER_LISTEN");
  app.add_option("--metrics-listen", metrics_listen,
                 "serve /metrics on this address instead of --listen (empty: on --listen)")
      ->envname("DS41_ROUTER_METRICS_LISTEN");
  app.add_option("--grpc-listen", grpc_listen, "gRPC address (Router service)")->envname("DS41_ROUTER_GRPC_LISTEN");
  app.add_option("--encoders", encoders, "encoder node addresses, comma separated")->envname("DS41_ENCODERS");
  app.add_option("--decoders", decoders, "decoder node addresses, comma separated")->envname("DS41_DECODERS");
  app.add_option("--cache", cache, "cache_service shard addresses, comma separated")->envname("DS41_CACHE_SHARDS");
  app.add_option("--cache-ack-log", cache_ack_log,
                 "append every cache unit (reply record) a shard acknowledged to this file (an audit for tests; "
                 "docs/chaos.md)")
      ->envname("DS41_CACHE_ACK_LOG");
  app.add_option("--api-keys", api_keys, "tenant file: {\"keys\": {key: {tenant, salt, max_prompt_tokens}}, \"tenants\": {name: {max_running, tokens_per_minute}}} (empty: open)")->envname("DS41_API_KEYS");
  app.add_option("--model-id", model_id, "the model name clients use")->envname("DS41_MODEL_ID");
  app.add_option("--unit-tokens", unit_tokens, "cache unit size (even)")->check(CLI::Range(2, 4096))->envname("DS41_UNIT_TOKENS");
  app.add_option("--max-queue-seconds", max_queue_s,
                 "refuse a new request with 429 and Retry-After when its predicted wait behind queued work exceeds "
                 "this (0: never), so admitted requests keep a bounded time to first token under overload")
      ->check(CLI::Range(0.0, 86400.0))
      ->envname("DS41_MAX_QUEUE_SECONDS");
  app.add_option("--max-running", max_running, "requests in flight before 429")->check(CLI::Range(1, 100000))
      ->envname("DS41_MAX_RUNNING");
  app.add_option("--max-sessions", max_sessions,
                 "sessions whose last turn's nodes are remembered for placement (least recently bound dropped)")
      ->check(CLI::Range(1, 100000000))
      ->envname("DS41_ROUTER_MAX_SESSIONS");
  std::vector<std::string> policies;
  for (ds41::PlacementPolicy p : ds41::kPlacementPolicies) policies.push_back(ds41::PlacementPolicyName(p));
  app.add_option("--placement", placement,
                 "placement policy: cost (the cost model; the others are baselines for comparison)")
      ->check(CLI::IsMember(policies))
      ->envname("DS41_PLACEMENT");
  app.add_option("--cost-profile", cost_profile,
                 "rate profile (ds41-sim calibrate's, or sim/profiles/) whose rates the cost model starts from: prefill, "
                 "replay and prefix load per token, the decode step per sequence (default: generic rates; the encoder "
                 "rate is learned from traffic either way)")
      ->check(CLI::ExistingFile)
      ->envname("DS41_COST_PROFILE");
  app.add_option("--reply-splice", reply_splice,
                 "record chat replies' generated ids in the cache and splice them back when a client re-sends a "
                 "reply, so the next turn hits the whole context (docs/session_reuse.md)")
      ->envname("DS41_REPLY_SPLICE");
  app.add_option("--max-request-bytes", max_body, "largest request body")->envname("DS41_MAX_REQUEST_BYTES");
  app.add_option("--request-timeout-seconds", request_timeout_s,
                 "a request's deadline when its client sets none (x-request-timeout, x-stainless-timeout), and the longest")
      ->check(CLI::Range(1, 86400))
      ->envname("DS41_REQUEST_TIMEOUT_SECONDS");
  app.add_option("--shutdown-grace-seconds", grace_s,
                 "on SIGTERM: refuse new requests, let those in flight finish this long, then cancel them")
      ->check(CLI::Range(0, 3600))
      ->envname("DS41_SHUTDOWN_GRACE_SECONDS");
  app.add_option("--max-migrations", max_migrations,
                 "times a request is resumed on another decoder when its decoder dies mid-stream (0: end the stream with an error)")
      ->check(CLI::Range(0, 16))
      ->envname("DS41_MAX_MIGRATIONS");
  app.add_option("--io-threads", io_threads, "HTTP io threads")->check(CLI::Range(1, 64));
  app.add_option("--workers", workers,
                 "threads that check, render and tokenize requests and place them (a stream holds none of them; one is "
                 "the caller's: at least 2)")
      ->check(CLI::Range(2, 4096));
  app.add_option("--poll-ms", poll_ms, "node health-check interval")->check(CLI::Range(10, 3600000));
  app.add_option("--header-timeout-ms", header_timeout_ms, "slow clients: time allowed to send the headers")
      ->check(CLI::Range(10, 600000));
  app.add_option("--admin-token-file", admin_token_file,
                 "file holding the operator's token for the RouterAdmin service (node registration); without it "
                 "every admin call is refused")
      ->envname("DS41_ADMIN_TOKEN_FILE");
  app.add_option("--max-connections", max_connections,
                 "open HTTP connections beyond which new ones get 503 (keep it under the process's file limit)")
      ->check(CLI::Range(1, 10000000));
  ds41::TlsOptions tls;
  ds41::AddTlsFlags(app, &tls);
  CLI11_PARSE(app, argc, argv);
  if (ds41::Status st = ds41::InstallTransportSecurity(tls); !st.ok()) {
    std::cerr << st.ToString() << "\n";
    return 2;
  }
  if (unit_tokens % 2) {
    std::cerr << "--unit-tokens must be even\n";
    return 2;
  }
  auto body_bytes = ds41::ParseByteSize(max_body);
  if (!body_bytes.ok()) {
    std::cerr << body_bytes.status().ToString() << "\n";
    return 2;
  }
  // The router tokenizes and checks fingerprints: it reads the config and the checkpoint's headers only.
  auto model = ds41::ReadModelIdentity(model_dir);
  if (!model.ok()) {
    std::cerr << model.status().ToString() << "\n";
    return 1;
  }
  auto tokenizer = ds41::Tokenizer::Load(model_dir + "/tokenizer.json");
  if (!tokenizer.ok()) {
    std::cerr << tokenizer.status().ToString() << "\n";
    return 1;
  }
  ds41::TenantTable tenants;
  if (!api_keys.empty()) {
    auto t = ds41::TenantTable::Load(api_keys);
    if (!t.ok()) {
      std::cerr << t.status().ToString() << "\n";
      return 1;
    }
    tenants = std::move(*t);
  }
  const ds41::ModelConfig& cfg = model->config;
  const std::string fp = model->fingerprint;
  // The store's shard fan-out (lookups, reply records) runs here, each caller taking part.
  ds41::ThreadPool cache_io(4, ds41::ThreadPool::Idle::kSleep, "router-io");
  auto connected = ds41::ConnectCache(cache, cache_ack_log, &cache_io);
  if (!connected.ok()) {
    std::cerr << "--cache: " << connected.status().ToString() << "\n";
    return 2;
  }
  std::unique_ptr<ds41::CacheClient> cache_client = std::move(*connected);
  auto registry = std::make_shared<prometheus::Registry>();
  ds41::RouterMetrics metrics(*registry);
  // Each tenant's quota from the tenant file (its "tenants" section), with metrics per tenant name;
  // made before the core and the API, so it outlives every request that holds a tenant's place.
  ds41::TenantLimits tenant_limits(tenants, registry.get());
  ds41::NodeClient node_client(std::make_shared<ds41::ChannelSet>(), fp);
  ds41::NodeTableOptions no;
  no.poll_interval = std::chrono::milliseconds(poll_ms);
  no.on_change = [](const ds41::NodeView& n, ds41::NodeState before) {
    std::cerr << "router: " << ds41::NodeRoleName(n.role) << " " << n.address << " " << ds41::NodeStateName(before)
              << " -> " << ds41::NodeStateName(n.state) << (n.error.empty() ? "" : ": " + n.error) << std::endl;
  };
  ds41::NodeTable nodes(&node_client, no);
  for (const auto& a : ds41::SplitList(encoders)) nodes.Add(ds41::NodeRole::kEncoder, a);
  for (const auto& a : ds41::SplitList(decoders)) nodes.Add(ds41::NodeRole::kDecoder, a);
  nodes.PollAll();
  nodes.StartPolling();
  ds41::RouterOptions ro;
  ro.fingerprint = fp;
  ro.unit_tokens = unit_tokens;
  ro.window = cfg.window_size;
  ro.max_running = max_running;
  ro.max_queue_seconds = max_queue_s;
  ro.max_migrations = max_migrations;
  ro.max_sessions = static_cast<size_t>(max_sessions);
  ro.request_timeout = std::chrono::seconds(request_timeout_s);
  ro.placement.policy = *ds41::ParsePlacementPolicy(placement);
  if (!cost_profile.empty()) {
    auto profile = ds41::ReadRateProfile(cost_profile);
    if (!profile.ok()) {
      std::cerr << "--cost-profile: " << profile.status().ToString() << "\n";
      return 2;
    }
    ro.placement.cost = ds41::CostModelFromProfile(*profile);
  }
  // The request workers: built once here, shared by the two front doors and the core (retries).
  ds41::ThreadPool pool(workers, ds41::ThreadPool::Idle::kSleep, "ds41-req");
  ds41::RouterCore core(ro, &nodes, cache_client.get(), &node_client, &metrics, &pool);
  std::unique_ptr<ds41::ReplyRecords> replies;
  if (reply_splice && cache_client != nullptr) {
    auto made = ds41::ReplyRecords::Create(cache_client.get(), fp, static_cast<int32_t>(cfg.vocab_size), &metrics);
    if (!made.ok()) {
      std::cerr << "reply records: " << made.status().ToString() << "\n";
      return 2;
    }
    replies = std::move(*made);
  }
  ds41::OpenAiApi api(&core, &*tokenizer, model_id, cfg.max_position_embeddings, static_cast<int32_t>(cfg.vocab_size),
                      replies.get());
  if (cfg.vision && cfg.image_token_id >= 0) {
    ds41::ImageInputOptions images;
    images.enabled = true;
    images.image_token_id = cfg.image_token_id;
    images.geometry.patch_size = cfg.vision_patch_size;
    images.geometry.downsample_ratio = cfg.vision_downsample_ratio;
    images.geometry.max_n_token = cfg.vision_max_n_token;
    images.geometry.min_pixels = cfg.vision_min_pixels;
    if (cfg.vision_max_wh_ratio > 0) images.geometry.max_wh_ratio = cfg.vision_max_wh_ratio;
    if (ds41::Status s = images.geometry.Validate(); !s.ok()) {
      std::cerr << "vision config: " << s.ToString() << "\n";
      return 2;
    }
    api.SetImageInput(images);
  }
  api.SetTenantLimits(&tenant_limits);
  ds41::HttpFront front(&api, &tenants, &nodes, &metrics, registry, &pool);
  // host:port of an HTTP listener (port 0: any free one).
  auto listen_on = [](const std::string& address, ds41::HttpServerOptions* o) -> ds41::Status {
    const auto colon = address.rfind(':');
    const std::string port = colon == std::string::npos ? "" : address.substr(colon + 1);
    if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos || std::stoi(port) > 65535) {
      return ds41::InvalidArgumentError("\"" + address + "\" is not host:port");
    }
    o->host = address.substr(0, colon);
    o->port = std::stoi(port);
    return ds41::Status::Ok();
  };
  ds41::HttpServerOptions ho;
  if (ds41::Status s = listen_on(listen, &ho); !s.ok()) {
    std::cerr << "--listen: " << s.ToString() << "\n";
    return 2;
  }
  ho.io_threads = io_threads;
  ho.max_body_bytes = *body_bytes;
  ho.header_timeout = std::chrono::milliseconds(header_timeout_ms);
  ho.max_connections = max_connections;
  ds41::HttpServer http(ho);
  front.Register(&http, /*metrics=*/metrics_listen.empty());
  if (ds41::Status s = http.Start(); !s.ok()) {
    std::cerr << "http: " << s.ToString() << "\n";
    return 1;
  }
  // /metrics apart (--metrics-listen): a scraper's port that the API's clients need not reach, and
  // the other way round (the chart's NetworkPolicy admits each from its own sources).
  std::unique_ptr<ds41::HttpServer> metrics_http;
  std::string metrics_host;
  if (!metrics_listen.empty()) {
    ds41::HttpServerOptions mo;
    if (ds41::Status s = listen_on(metrics_listen, &mo); !s.ok()) {
      std::cerr << "--metrics-listen: " << s.ToString() << "\n";
      return 2;
    }
    metrics_host = mo.host;
    mo.io_threads = 1;
    mo.max_body_bytes = 1024;
    mo.header_timeout = std::chrono::milliseconds(header_timeout_ms);
    mo.max_connections = 64;
    metrics_http = std::make_unique<ds41::HttpServer>(mo);
    front.RegisterMetrics(metrics_http->routes());
    if (ds41::Status s = metrics_http->Start(); !s.ok()) {
      std::cerr << "metrics http: " << s.ToString() << "\n";
      return 1;
    }
  }
  ds41::RouterService service(&api, &tenants, &pool);
  std::string admin_token;
  if (!admin_token_file.empty()) {
    auto token = ds41::ReadAdminToken(admin_token_file);
    if (!token.ok()) {
      std::cerr << "--admin-token-file: " << token.status().ToString() << "\n";
      return 2;
    }
    admin_token = std::move(*token);
  }
  // The control plane: its own service, every call refused without the admin token.
  ds41::RouterAdminService admin(&nodes, ds41::AdminToken(admin_token));
  ds41::RpcServerOptions go;
  go.address = grpc_listen;
  auto rpc = ds41::StartRpcServer(go, {&service, &admin});
  if (!rpc.ok()) {
    std::cerr << "grpc: " << rpc.status().ToString() << "\n";
    return 1;
  }
  std::cout << "router ready http=" << ho.host << ":" << http.port() << " grpc=" << grpc_listen.substr(0, grpc_listen.rfind(':'))
            << ":" << rpc->port
            << (metrics_http ? " metrics=" + metrics_host + ":" + std::to_string(metrics_http->port()) : std::string())
            << " fingerprint=" << fp << " placement=" << placement << std::endl;
  const int sig = ds41::WaitForTerminationSignal();
  // Drain: /health reports 503 so load balancers stop sending, new requests get 503, in-flight ones
  // get the grace period, then what is left is cancelled (nodes stop it at their next step).
  std::cerr << "router: signal " << sig << ", draining (in-flight requests get " << grace_s << " s)\n";
  core.Drain();
  const auto grace_end = std::chrono::steady_clock::now() + std::chrono::seconds(grace_s);
  ds41::MarkShuttingDown(std::chrono::system_clock::now() + std::chrono::seconds(grace_s));
  if (!core.WaitIdle(grace_end)) {
    core.CancelAll(ds41::CancelReason::kShutdown);
    core.WaitIdle(std::chrono::steady_clock::now() + std::chrono::seconds(5));
  }
  http.Stop();
  if (metrics_http) metrics_http->Stop();
  rpc->server->Shutdown(std::chrono::system_clock::now());
  return 0;
}
