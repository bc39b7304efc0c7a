#include "router/http_front.h"

#include <prometheus/text_serializer.h>

#include <atomic>

#include "util/process_metrics.h"

namespace ds41 {

std::string WireJson(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

HttpFront::HttpFront(OpenAiApi* api, const TenantTable* tenants, NodeTable* nodes, RouterMetrics* metrics,
                     std::shared_ptr<prometheus::Registry> registry, ThreadPool* workers)
    : api_(api), tenants_(tenants), nodes_(nodes), metrics_(metrics), registry_(std::move(registry)), workers_(workers) {}

void HttpFront::Reply(const std::string& endpoint, HttpResponder& resp, const ApiOutcome& out) {
  HttpHeaders extra;
  if (out.retry_after_s > 0) extra.Add("Retry-After", std::to_string(out.retry_after_s));
  resp.Send(out.http_status, "application/json", WireJson(out.body), extra);
  if (metrics_) metrics_->Request(endpoint, out.http_status);
}

void HttpFront::Api(const std::string& endpoint, const HttpRequest& req, std::shared_ptr<HttpResponder> resp) {
  const auto arrival = std::chrono::steady_clock::now();
  auto tenant = tenants_->Resolve(std::string(req.headers.Get("authorization").value_or("")));
  if (!tenant.ok()) {
    Reply(endpoint, *resp, OpenAiApi::FromStatus(tenant.status()));
    return;
  }
  // Admitted first, on arrival: a request over its tenant's quota or --max-running is answered now,
  // on this io thread, before its body is parsed and without waiting for a worker; one admitted
  // counts from now (a request refused below gives its place back at once).
  std::shared_ptr<RouteAdmission> admission;
  if (std::optional<ApiOutcome> refused = api_->Admit(*tenant, &admission)) {
    Reply(endpoint, *resp, *refused);
    return;
  }
  std::optional<Json> parsed = ParseRequestJson(req.body);
  if (!parsed) {
    Reply(endpoint, *resp, OpenAiApi::Error(StatusCode::kInvalidArgument, "the request body is not valid JSON (or nests too deeply)"));
    return;
  }
  Json body = std::move(*parsed);
  ApiContext ctx;
  ctx.tenant = *tenant;
  ctx.session_id = std::string(req.headers.Get("x-session-id").value_or(""));
  if (ctx.session_id.size() > 256) {
    Reply(endpoint, *resp, OpenAiApi::Error(StatusCode::kInvalidArgument, "x-session-id is longer than 256 bytes"));
    return;
  }
  // The official clients send their timeout (x-stainless-timeout); either header sets the deadline.
  std::string_view timeout = req.headers.Get("x-request-timeout").value_or("");
  if (timeout.empty()) timeout = req.headers.Get("x-stainless-timeout").value_or("");
  auto deadline = DeadlineFromTimeoutHeader(timeout);
  if (!deadline.ok()) {
    Reply(endpoint, *resp, OpenAiApi::FromStatus(deadline.status()));
    return;
  }
  ctx.deadline = *deadline;
  ctx.arrival = arrival;
  ctx.admission = std::move(admission);
  ctx.cancel = std::make_shared<CancelToken>();
  resp->OnClose([cancel = ctx.cancel] { cancel->Cancel(CancelReason::kClient); });
  const bool stream = body.contains("stream") && body["stream"] == true;
  // The worker checks, renders and tokenizes the request and routes it; no thread waits while the
  // reply streams (chunks and the end come on gRPC's threads).
  workers_->Schedule([this, endpoint, ctx, body = std::move(body), resp, stream] {
    auto started = std::make_shared<std::atomic<bool>>(false);
    ChunkSink sink = [resp, started](const Json& chunk) {
      if (!started->load()) {
        if (!resp->StartStream(200, "text/event-stream")) return false;
        started->store(true);
      }
      return resp->Write("data: " + WireJson(chunk) + "\n\n");
    };
    ApiDone done = [this, endpoint, resp, started, stream](ApiOutcome out) {
      if (!started->load()) {
        // Errors before any chunk, and every non-streamed reply, are plain JSON responses.
        if (out.http_status != 200 || !stream) return Reply(endpoint, *resp, out);
        resp->StartStream(200, "text/event-stream");
      }
      if (out.http_status != 200) resp->Write("data: " + WireJson(out.body) + "\n\n");
      resp->Write("data: [DONE]\n\n");
      resp->Finish();
      if (metrics_) metrics_->Request(endpoint, out.http_status);
    };
    api_->Serve(endpoint == "chat", ctx, body, std::move(sink), std::move(done));
  });
}

void HttpFront::Register(HttpRouter* routes, bool metrics) {
  routes->Add("POST", "/v1/chat/completions",
                 [this](const HttpRequest& r, std::shared_ptr<HttpResponder> w) { Api("chat", r, std::move(w)); });
  routes->Add("POST", "/v1/completions",
                 [this](const HttpRequest& r, std::shared_ptr<HttpResponder> w) { Api("completions", r, std::move(w)); });
  routes->Add("GET", "/v1/models", [this](const HttpRequest& r, std::shared_ptr<HttpResponder> w) {
    auto tenant = tenants_->Resolve(std::string(r.headers.Get("authorization").value_or("")));
    if (!tenant.ok()) {
      Reply("models", *w, OpenAiApi::FromStatus(tenant.status()));
      return;
    }
    ApiOutcome out;
    out.body = api_->Models();
    Reply("models", *w, out);
  });
  // Liveness: the process serves HTTP. Nothing about the pools: a decoder outage must not make the
  // kubelet restart routers (that is /health's readiness), nor a drain.
  routes->Add("GET", "/livez", [](const HttpRequest&, std::shared_ptr<HttpResponder> w) {
    w->Send(200, "application/json", R"({"status":"alive"})");
  });
  routes->Add("GET", "/health", [this](const HttpRequest&, std::shared_ptr<HttpResponder> w) {
    Json nodes = Json::array();
    int healthy_decoders = 0;
    for (const NodeView& n : nodes_->All()) {
      nodes.push_back({{"address", n.address}, {"role", NodeRoleName(n.role)}, {"state", NodeStateName(n.state)},
                       {"error", n.error}});
      healthy_decoders += n.role == NodeRole::kDecoder && n.state == NodeState::kHealthy;
    }
    // Ready when at least one decoder can take requests and the router is not shutting down.
    const bool draining = api_->draining();
    const int code = healthy_decoders > 0 && !draining ? 200 : 503;
    const char* status = draining ? "shutting down" : code == 200 ? "ok" : "no healthy decoder";
    w->Send(code, "application/json", WireJson({{"status", status}, {"nodes", nodes}}));
  });
  if (metrics) RegisterMetrics(routes);
}

void HttpFront::RegisterMetrics(HttpRouter* routes) {
  routes->Add("GET", "/metrics", [this](const HttpRequest&, std::shared_ptr<HttpResponder> w) {
    if (metrics_) {
      std::map<std::string, std::map<std::string, int>> counts;
      for (const NodeView& n : nodes_->All()) ++counts[NodeRoleName(n.role)][NodeStateName(n.state)];
      for (const char* role : {"encoder", "decoder"}) {
        for (const char* state : {"pending", "healthy", "down", "refused"}) metrics_->SetNodes(role, state, counts[role][state]);
      }
    }
    std::vector<prometheus::MetricFamily> families = registry_->Collect();
    for (auto& f : SharedProcessMetrics()->Collect()) families.push_back(std::move(f));
    w->Send(200, "text/plain; version=0.0.4", prometheus::TextSerializer().Serialize(families));
  });
}

}  // namespace ds41
