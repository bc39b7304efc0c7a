// The router's front door with no nodes, for the harnesses that drive API requests
// (http_request, openai_request, grpc_request): the tokenizer of the tiny checkpoint
// (fuzz/data/tokenizer.json), two tenants with API keys "k1" (prompt limit 64 tokens) and "k2",
// RouterCore over an empty NodeTable and no cache, OpenAiApi, and HttpFront's routes on a bare
// HttpRouter over an inline worker pool (a ThreadPool of 1 runs each task on the calling thread).
// A request that passes every check ends with UNAVAILABLE ("no healthy decoder node"); nothing
// leaves the process and no thread is started.
//
// Thread-compatible: one per process (Get), used by the harness's one thread.
#pragma once

#include <memory>

#include <prometheus/registry.h>

#include "http/router.h"
#include "router/http_front.h"
#include "router/node_table.h"
#include "router/openai_api.h"
#include "router/router_core.h"
#include "router/router_metrics.h"
#include "router/tenants.h"
#include "tokenizer/tokenizer.h"
#include "util/thread_pool.h"

namespace ds41::fuzz {

inline constexpr int64_t kFrontDoorContext = 4096;
inline constexpr int32_t kFrontDoorVocab = 512;  // the tiny checkpoint's
inline constexpr const char* kFrontDoorModel = "deepseek-v4.1-flash";

struct FrontDoor {
  // Built on first use; aborts when fuzz/data/tokenizer.json cannot be loaded (a broken checkout,
  // not a finding).
  static FrontDoor& Get();

  FrontDoor(Tokenizer tok, TenantTable tenant_table);

  Tokenizer tokenizer;
  TenantTable tenants;
  std::shared_ptr<prometheus::Registry> registry;
  RouterMetrics metrics;
  NodeTable nodes;
  RouterCore core;
  OpenAiApi api;
  ThreadPool workers;
  HttpFront front;
  HttpRouter routes;
};

}  // namespace ds41::fuzz
