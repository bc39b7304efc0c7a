// Writes the binary seed corpora (unit, cache_wire, grpc_request) with the project's own encoders,
// so every seed is byte for byte what a client, node or store sends: units of the tiny and small
// presets (full and tail), data-path frames of every opcode, and each service's request messages
// as the callers build them (node_client's codec, the cache client's fields, the router's API).
// Not a test: run it by hand when a format changes, then commit what changed.
//   build/fuzz/ds41_fuzz_seed_writer fuzz/corpus
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "cache.pb.h"
#include "cache_data/wire.h"
#include "engine/config/presets.h"
#include "node_client/node_codec.h"
#include "router.pb.h"
#include "unit/unit_format.h"

namespace {

namespace cpb = ds41::cache::v1;
namespace npb = ds41::node::v1;
namespace rpb = ds41::router::v1;

constexpr const char* kModel = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";  // the harnesses'

std::string g_root;

void Write(const std::string& dir, const std::string& name, uint8_t mode, const std::string& bytes) {
  std::filesystem::create_directories(g_root + "/" + dir);
  std::ofstream f(g_root + "/" + dir + "/" + name, std::ios::binary);
  f.put(static_cast<char>(mode));
  f << bytes;
}

std::string Key(char c) { return std::string(32, c); }

ds41::Unit MakeUnit(const ds41::UnitLayout& l, int64_t first, int tokens, std::mt19937& rng) {
  ds41::Unit u;
  u.model = *ds41::ParseFingerprint(kModel);
  u.first_position = first;
  u.tokens = tokens;
  for (const auto& s : l.sources) {
    ds41::UnitSource us;
    const size_t e = static_cast<size_t>(tokens / s.ratio), carry = static_cast<size_t>(tokens % s.ratio) * s.head_dim;
    us.main_kv.resize(e * s.main_bytes);
    us.index_keys.resize(e * s.index_bytes);
    for (auto& b : us.main_kv) b = static_cast<uint8_t>(rng());
    for (auto& b : us.index_keys) b = static_cast<uint8_t>(rng());
    us.carry_kv.assign(carry, 0.25f);
    us.carry_gate.assign(carry, -1.5f);
    u.sources.push_back(std::move(us));
  }
  return u;
}

template <typename M>
std::string Bytes(const M& m) {
  std::string s;
  m.SerializeToString(&s);
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
    return 2;
  }
  g_root = argv[1];
  std::mt19937 rng(41);
  const ds41::UnitLayout tiny = *ds41::UnitLayout::FromConfig(ds41::TinyConfig(), 64);
  const ds41::UnitLayout small = *ds41::UnitLayout::FromConfig(ds41::SmallConfig(), 64);
  const std::string full = ds41::EncodeUnit(tiny, MakeUnit(tiny, 64, 64, rng));
  const std::string tail = ds41::EncodeUnit(tiny, MakeUnit(tiny, 128, 10, rng));

  // unit: byte 0 = (layout << 1) | fix-checksum.
  Write("unit", "tiny_full", 0, full);
  Write("unit", "tiny_tail_10_tokens", 0, tail);
  Write("unit", "tiny_full_fix_crc", 1, full);
  Write("unit", "small_full", 2, ds41::EncodeUnit(small, MakeUnit(small, 0, 64, rng)));
  Write("unit", "small_tail_33_tokens_fix_crc", 3, ds41::EncodeUnit(small, MakeUnit(small, 64, 33, rng)));

  // cache_wire: byte 0 = client side (bit 0), one model (bit 1), max keys 4 (bits 2-3 = 2).
  const ds41::wire::NamespaceView ns{Key('n'), kModel, ds41::kUnitFormatVersion};
  const std::string put_full = ds41::wire::EncodePutPrefix(1, ns, Key('k'), "", full.size()) + full;
  const std::string put_tail = ds41::wire::EncodePutPrefix(2, ns, Key('t'), Key('k'), tail.size()) + tail;
  const std::string get = ds41::wire::EncodeGet(3, ns, Key('k') + Key('t') + Key('x'));
  Write("cache_wire", "server_put_full_put_tail_get", 0x02 | 0x08, put_full + put_tail + get);
  Write("cache_wire", "server_get_any_model", 0x08, get);
  Write("cache_wire", "client_put_ok_units_error", 0x01 | 0x08,
        ds41::wire::EncodePutOk(1) + ds41::wire::EncodePutOk(2) +
            ds41::wire::EncodeUnitPrefix(3, Key('k'), ds41::wire::UnitResult::kFound, full.size()) + full +
            ds41::wire::EncodeUnitPrefix(3, Key('t'), ds41::wire::UnitResult::kReadFailed, 9) + "read fail" +
            ds41::wire::EncodeUnitPrefix(3, Key('x'), ds41::wire::UnitResult::kMiss, 0) +
            ds41::wire::EncodeError(4, ds41::InvalidArgumentError("foreign namespace"), false) +
            ds41::wire::EncodeError(5, ds41::InvalidArgumentError("bad magic"), true));

  // grpc_request: byte 0 = message (0-3 cache, 4-8 node, 9-11 router).
  cpb::PutRequest put;
  put.mutable_ns()->set_id(Key('n'));
  put.mutable_ns()->set_model_fingerprint(kModel);
  put.mutable_ns()->set_format_version(ds41::kUnitFormatVersion);
  put.mutable_ref()->set_key(Key('t'));
  put.mutable_ref()->set_parent(Key('k'));
  put.set_unit(tail);
  Write("grpc_request", "cache_put_tail", 0, Bytes(put));
  put.mutable_ref()->set_key(Key('k'));
  put.mutable_ref()->clear_parent();
  put.set_unit(full);
  Write("grpc_request", "cache_put_full", 0, Bytes(put));
  cpb::GetRequest getr;
  *getr.mutable_ns() = put.ns();
  getr.add_refs()->set_key(Key('k'));
  getr.add_refs()->set_key(Key('t'));
  Write("grpc_request", "cache_get", 1, Bytes(getr));
  cpb::LookupRequest look;
  *look.mutable_ns() = put.ns();
  look.add_keys(Key('n'));
  look.add_keys(Key('k'));
  look.set_first_is_root(true);
  look.set_unit_tokens(64);
  look.set_prompt_tokens(138);
  Write("grpc_request", "cache_lookup", 2, Bytes(look));
  cpb::DeleteNamespaceRequest del;
  *del.mutable_ns() = put.ns();
  Write("grpc_request", "cache_delete_namespace", 3, Bytes(del));

  ds41::PrefillInput pin;
  pin.ns.fill('n');
  for (int i = 0; i < 100; ++i) pin.tokens.push_back(5 + i * 3 % 500);
  pin.cached_tokens = 64;
  pin.swa_peer = "127.0.0.1:7002";
  npb::PrefillRequest preq;
  ds41::EncodePrefillRequest(pin, kModel, &preq);
  Write("grpc_request", "encoder_prefill", 4, Bytes(preq));
  ds41::GenerateInput gin;
  gin.request_id = "chatcmpl-0123456789ab";
  gin.session_id = "acme/agent-7";
  gin.ns = pin.ns;
  gin.tokens = pin.tokens;
  gin.cached_tokens = 64;
  gin.encoder = "127.0.0.1:7001";
  gin.swa_peer = "127.0.0.1:7003";
  gin.sampling.temperature = 0.7f;
  gin.sampling.top_p = 0.95f;
  gin.sampling.seed = 42;
  gin.sampling.max_tokens = 64;
  gin.sampling.stop_ids = {1};
  npb::GenerateRequest greq;
  ds41::EncodeGenerateRequest(gin, kModel, &greq);
  Write("grpc_request", "decoder_generate", 5, Bytes(greq));
  ds41::UnitKey prefix;
  prefix.fill('p');
  npb::SwaStateRequest sreq;
  ds41::EncodeSwaStateRequest(pin.ns, prefix, 64, kModel, &sreq);
  Write("grpc_request", "swa_get_state", 6, Bytes(sreq));
  ds41::NodeStatusReport rep;
  rep.fingerprint = kModel;
  rep.role = "decoder";
  rep.running = 3;
  rep.waiting = 1;
  rep.queued_tokens = 200;
  rep.resident_bytes = 1 << 20;
  rep.warm_sessions = {{"acme/agent-7", 164}, {"beta/s", 70}};
  npb::NodeStatus st;
  ds41::EncodeNodeStatus(rep, &st);
  Write("grpc_request", "node_status", 7, Bytes(st));
  ds41::PrefillOutput pout;
  pout.units = {full, tail};
  pout.swa = std::string(64, 's');
  pout.handoff = std::string(32, 'h');
  pout.cached_tokens = 64;
  pout.computed_tokens = 36;
  pout.swa_source = "replay";
  npb::PrefillResponse presp;
  ds41::EncodePrefillResponse(pout, &presp);
  Write("grpc_request", "encoder_prefill_response", 8, Bytes(presp));

  rpb::ApiRequest api;
  api.set_api_key("k1");
  api.set_session_id("agent-7");
  api.set_body_json(R"({"model":"deepseek-v4.1-flash","messages":[{"role":"user","content":"Hello"}],"max_tokens":16})");
  Write("grpc_request", "router_chat", 9, Bytes(api));
  api.set_api_key("k2");
  api.clear_session_id();
  api.set_body_json(R"({"model":"deepseek-v4.1-flash","prompt":[5,6,7,8],"max_tokens":8,"return_token_ids":true})");
  Write("grpc_request", "router_completions", 10, Bytes(api));
  rpb::RegisterNodeRequest reg;
  reg.set_role("decoder");
  reg.set_address("10.0.0.7:7002");
  Write("grpc_request", "router_register_node", 11, Bytes(reg));
  std::printf("seeds written under %s\n", g_root.c_str());
  return 0;
}
