// Surface: the cache's bulk data path (cache_data/wire.h), both directions: the frames a cache
// server reads from a client (PUT, GET), checked by the same RequestChecks the server applies
// (cache_service/request_checks.h: namespace, keys, key count, unit size, framing, checksum,
// tail/parent, model), and the frames a client reads from a server (PUT_OK, UNIT, ERROR), with a
// found unit's bytes verified as the client does.
//
// Input: byte 0 bit 0 picks the side (0: server reading requests, 1: client reading responses),
// bit 1 whether the server accepts only one model (kModel) or any, bits 2-3 the key bound
// (max_keys 0, 1, 4 or 65536); the rest is the byte stream of one connection, read frame by frame
// as the server's session and the client's channel read it (a header, then its body), until
// the bytes run out or a frame is refused (which closes the connection).
// Properties: no crash; a header is accepted only with its bound, so no body read is larger than
// the opcode allows; every frame that parses encodes back to the same bytes.
#include "cache_data/wire.h"
#include "cache_service/request_checks.h"
#include "fuzz/fuzz_support.h"
#include "unit/reply_record.h"

namespace {

namespace wire = ds41::wire;

constexpr const char* kModel = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

// The server's side: PUT and GET, then the checks a data session runs before touching the store.
bool ServerFrame(const ds41::RequestChecks& checks, const wire::Header& h, std::string_view frame) {
  const std::string_view body = frame.substr(wire::kHeaderBytes);
  if (h.op == wire::Op::kPut) {
    auto v = wire::ParsePut(body);
    if (!v.ok()) return false;
    DS41_FUZZ_CHECK(wire::EncodePutPrefix(h.id, v->ns, v->key, v->parent, v->unit.size()) + std::string(v->unit) ==
                    frame);
    auto put = checks.CheckPut({v->ns.id, v->ns.model_fingerprint, v->ns.format_version}, v->key, v->parent, v->unit);
    if (put.ok()) DS41_FUZZ_CHECK(put->tail == !v->parent.empty());
    return true;  // a refused put is answered with an ERROR frame; the connection goes on
  }
  auto v = wire::ParseGet(body, checks.max_keys_per_request());
  if (!v.ok()) return false;
  DS41_FUZZ_CHECK(wire::EncodeGet(h.id, v->ns, std::string(v->keys)) == frame);
  ds41::Key32 ns;
  if (checks.CheckNamespace({v->ns.id, v->ns.model_fingerprint, v->ns.format_version}, &ns).ok() &&
      checks.CheckKeyCount(v->count()).ok()) {
    for (size_t i = 0; i < v->count(); ++i) {
      ds41::Key32 key;
      DS41_FUZZ_CHECK(ds41::ToKey(v->key(i), &key));
    }
  }
  return true;
}

// The client's side: PUT_OK, UNIT (a found unit is verified before use), ERROR.
bool ClientFrame(const wire::Header& h, std::string_view frame) {
  const std::string_view body = frame.substr(wire::kHeaderBytes);
  switch (h.op) {
    case wire::Op::kPutOk:
      DS41_FUZZ_CHECK(wire::EncodePutOk(h.id) == frame);
      return true;
    case wire::Op::kUnit: {
      auto v = wire::ParseUnit(body);
      if (!v.ok()) return false;
      DS41_FUZZ_CHECK(wire::EncodeUnitPrefix(h.id, v->key, v->result, v->bytes.size()) + std::string(v->bytes) == frame);
      if (v->result == wire::UnitResult::kFound) (void)ds41::VerifyStoredBytes(v->bytes);
      return true;
    }
    case wire::Op::kError: {
      const ds41::Status s = wire::ParseError(body);
      DS41_FUZZ_CHECK(!s.ok());
      return !(h.flags & wire::kFlagFatal);
    }
    default:
      DS41_FUZZ_CHECK(false);  // ParseHeader lets no other opcode through on this side
      return false;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool client = data[0] & 1;
  static const size_t kMaxKeys[] = {0, 1, 4, 65536};
  const size_t max_keys = kMaxKeys[(data[0] >> 2) & 3];
  const ds41::RequestChecks checks((data[0] & 2) ? kModel : "", max_keys);
  std::string_view stream(reinterpret_cast<const char*>(data + 1), size - 1);
  for (int frames = 0; stream.size() >= wire::kHeaderBytes && frames < 256; ++frames) {
    auto h = wire::ParseHeader(stream.data(), /*requests=*/!client, max_keys);
    if (!h.ok()) return 0;
    if (client) {
      DS41_FUZZ_CHECK(h->op == wire::Op::kPutOk || h->op == wire::Op::kUnit || h->op == wire::Op::kError);
    } else {
      DS41_FUZZ_CHECK(h->op == wire::Op::kPut || h->op == wire::Op::kGet);
    }
    const size_t total = wire::kHeaderBytes + h->body_length;
    if (stream.size() < total) return 0;  // the peer would have to send more
    const std::string_view frame = stream.substr(0, total);
    if (!(client ? ClientFrame(*h, frame) : ServerFrame(checks, *h, frame))) return 0;
    stream.remove_prefix(total);
  }
  return 0;
}
