// Surface: the gRPC messages every service reads, parsed from bytes as gRPC does
// (ParseFromArray) and passed to the handler's own checks, which the services call before any
// work:
//   Cache (cache_service/grpc_requests.h): Put, Get, Lookup, DeleteNamespace;
//   Encoder and Decoder (node_client/node_codec.h): Prefill and Generate decoded with the
//     protocol's checks, then the nodes' admission checks against the tiny model
//     (CheckPrefillInput, CheckGenerateInput); SwaState's GetSwaState;
//   Router (router/router_service.h): ApiRequest (tenant, body, session) then the OpenAiApi call
//     the service makes (fuzz/front_door.h: no node, so it ends refused); RouterAdmin's
//     RegisterNode (its role and address: router/node_table.h's CheckNodeAddress);
// and, the other way, what a caller reads back from a node it does not control: the router
// reads NodeStatus, a decoder reads a PrefillResponse (whose units it decodes).
//
// Input: byte 0 picks the message (modulo 12); the rest is its protobuf encoding.
// Properties: no crash or exception; a refusal is INVALID_ARGUMENT or FAILED_PRECONDITION (or
// UNAUTHENTICATED for an unknown API key); what passes respects the bounds the checks promise.
#include <cctype>
#include <cstring>

#include "cache_service/grpc_requests.h"
#include "engine/config/presets.h"
#include "fuzz/front_door.h"
#include "fuzz/fuzz_support.h"
#include "node_client/node_codec.h"
#include "node_client/node_protocol.h"
#include "router/node_table.h"
#include "router/router_service.h"
#include "unit/reply_record.h"
#include "unit/unit_format.h"

namespace {

namespace cpb = ds41::cache::v1;
namespace npb = ds41::node::v1;
namespace rpb = ds41::router::v1;

// The model fingerprint the services in this harness serve (seeds carry it).
constexpr const char* kModel = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

bool IsRefusal(const ds41::Status& s) {
  return s.code() == ds41::StatusCode::kInvalidArgument || s.code() == ds41::StatusCode::kFailedPrecondition;
}

template <typename Message>
bool Parse(Message* m, const uint8_t* data, size_t size) {
  return m->ParseFromArray(data, static_cast<int>(size));
}

const ds41::ModelConfig& Tiny() {
  static const ds41::ModelConfig c = ds41::TinyConfig();
  return c;
}

void Cache(int which, const uint8_t* data, size_t size) {
  static const ds41::RequestChecks checks(kModel, /*max_keys_per_request=*/1024);
  switch (which) {
    case 0: {
      cpb::PutRequest req;
      if (!Parse(&req, data, size)) return;
      auto put = ds41::CheckPutRequest(checks, req);
      if (!put.ok()) {
        DS41_FUZZ_CHECK(IsRefusal(put.status()));
        return;
      }
      DS41_FUZZ_CHECK(put->tail == !req.ref().parent().empty() && req.unit().size() <= ds41::kMaxUnitBytes);
      DS41_FUZZ_CHECK(ds41::VerifyStoredBytes(req.unit()).ok());  // a unit or a reply record
      return;
    }
    case 1: {
      cpb::GetRequest req;
      if (!Parse(&req, data, size)) return;
      auto keys = ds41::CheckGetRequest(checks, req);
      if (!keys.ok()) {
        DS41_FUZZ_CHECK(IsRefusal(keys.status()));
        return;
      }
      DS41_FUZZ_CHECK(keys->keys.size() == static_cast<size_t>(req.refs_size()) && keys->keys.size() <= 1024);
      return;
    }
    case 2: {
      cpb::LookupRequest req;
      if (!Parse(&req, data, size)) return;
      auto keys = ds41::CheckLookupRequest(checks, req);
      if (!keys.ok()) {
        DS41_FUZZ_CHECK(IsRefusal(keys.status()));
        return;
      }
      DS41_FUZZ_CHECK(keys->keys.size() == static_cast<size_t>(req.keys_size()) && keys->keys.size() <= 1024);
      DS41_FUZZ_CHECK(!req.first_is_root() || !keys->keys.empty());
      return;
    }
    default: {
      cpb::DeleteNamespaceRequest req;
      if (!Parse(&req, data, size)) return;
      auto ns = ds41::CheckDeleteNamespaceRequest(checks, req);
      if (!ns.ok()) DS41_FUZZ_CHECK(IsRefusal(ns.status()));
      return;
    }
  }
}

void Node(int which, const uint8_t* data, size_t size) {
  switch (which) {
    case 0: {
      npb::PrefillRequest req;
      if (!Parse(&req, data, size)) return;
      ds41::PrefillInput in;
      ds41::Status s = ds41::DecodePrefillRequest(req, kModel, &in);
      if (s.ok()) s = ds41::CheckPrefillInput(in, Tiny());
      if (!s.ok()) {
        DS41_FUZZ_CHECK(IsRefusal(s));
        return;
      }
      DS41_FUZZ_CHECK(!in.tokens.empty() && in.cached_tokens >= 0 &&
                      in.cached_tokens < static_cast<int64_t>(in.tokens.size()) && in.unit_tokens > 0);
      return;
    }
    case 1: {
      npb::GenerateRequest req;
      if (!Parse(&req, data, size)) return;
      ds41::GenerateInput in;
      ds41::Status s = ds41::DecodeGenerateRequest(req, kModel, &in);
      if (s.ok()) s = ds41::CheckGenerateInput(in, Tiny());
      if (!s.ok()) {
        DS41_FUZZ_CHECK(IsRefusal(s));
        return;
      }
      DS41_FUZZ_CHECK(in.session_id.size() <= ds41::kMaxSessionIdBytes && in.sampling.max_tokens > 0 &&
                      in.sampling.stop_ids.size() <= ds41::kMaxStopTokens && !in.encoder.empty());
      return;
    }
    case 2: {
      npb::SwaStateRequest req;
      if (!Parse(&req, data, size)) return;
      ds41::UnitKey ns, key;
      const ds41::Status s = ds41::DecodeSwaStateRequest(req, kModel, &ns, &key);
      if (!s.ok()) DS41_FUZZ_CHECK(IsRefusal(s));
      return;
    }
    case 3: {  // the router polls every node's status
      npb::NodeStatus st;
      if (!Parse(&st, data, size)) return;
      const ds41::NodeStatusReport r = ds41::DecodeNodeStatus(st);
      DS41_FUZZ_CHECK(r.warm_sessions.size() == static_cast<size_t>(st.warm_sessions_size()));
      return;
    }
    default: {  // a decoder reads the encoder's answer and decodes its units
      npb::PrefillResponse resp;
      if (!Parse(&resp, data, size)) return;
      const ds41::PrefillOutput out = ds41::DecodePrefillResponse(&resp);
      static const ds41::UnitLayout layout = *ds41::UnitLayout::FromConfig(Tiny(), ds41::kDefaultUnitTokens);
      for (const std::string& u : out.units) (void)ds41::DecodeUnit(layout, u);
      return;
    }
  }
}

void Router(int which, const uint8_t* data, size_t size) {
  ds41::fuzz::FrontDoor& door = ds41::fuzz::FrontDoor::Get();
  if (which == 2) {
    rpb::RegisterNodeRequest req;
    if (!Parse(&req, data, size)) return;
    auto role = ds41::CheckRegisterNodeRole(req);
    if (!role.ok()) DS41_FUZZ_CHECK(IsRefusal(role.status()));
    // An address that passes is printable host:port text: nothing else reaches a dial or a log.
    const ds41::Status addr = ds41::CheckNodeAddress(req.address());
    if (addr.ok()) {
      DS41_FUZZ_CHECK(!req.address().empty() && req.address().size() <= 255);
      for (char c : req.address()) DS41_FUZZ_CHECK(std::isalnum(static_cast<unsigned char>(c)) || std::strchr("-.:[]", c) != nullptr);
    } else {
      DS41_FUZZ_CHECK(addr.code() == ds41::StatusCode::kInvalidArgument);
    }
    return;
  }
  rpb::ApiRequest req;
  if (!Parse(&req, data, size)) return;
  auto checked = ds41::CheckApiRequest(door.tenants, req);
  if (!checked.ok()) {
    DS41_FUZZ_CHECK(IsRefusal(checked.status()) || checked.status().code() == ds41::StatusCode::kUnauthenticated);
    return;
  }
  DS41_FUZZ_CHECK(checked->body.is_object() && checked->session_id.size() <= 256);
  ds41::ApiContext ctx;
  ctx.tenant = checked->tenant;
  ctx.session_id = checked->session_id;
  ctx.cancel = std::make_shared<ds41::CancelToken>();
  const ds41::ChunkSink sink = [](const ds41::Json& chunk) {
    (void)ds41::WireJson(chunk);
    return true;
  };
  const ds41::ApiOutcome out = which == 0 ? door.api.ChatCompletions(ctx, checked->body, sink)
                                          : door.api.Completions(ctx, checked->body, sink);
  DS41_FUZZ_CHECK(!out.status.ok());  // no node: nothing can succeed
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int which = data[0] % 12;
  ++data;
  --size;
  if (which < 4) {
    Cache(which, data, size);
  } else if (which < 9) {
    Node(which - 4, data, size);
  } else {
    Router(which - 9, data, size);
  }
  return 0;
}
