#include "cache_data/wire.h"

#include <cstring>

#include "util/error_table.h"

namespace ds41::wire {
namespace {

constexpr size_t kPutFixed = kNamespaceBytes + kKeyBytes + 1 + kKeyBytes;
constexpr size_t kGetFixed = kNamespaceBytes + 4;
constexpr size_t kUnitFixed = kKeyBytes + 1;

uint32_t Load32(const uint8_t* p) { return p[0] | p[1] << 8 | p[2] << 16 | static_cast<uint32_t>(p[3]) << 24; }
uint16_t Load16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | p[1] << 8); }
const uint8_t* U8(std::string_view s) { return reinterpret_cast<const uint8_t*>(s.data()); }

void Put32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}
void Put16(std::string* out, uint16_t v) {
  out->push_back(static_cast<char>(v));
  out->push_back(static_cast<char>(v >> 8));
}
// Fixed-width field: the value, zero-padded or cut to `width` (callers pass validated sizes; a
// wrong size is then caught by the receiver's checks, not by a short frame).
void PutFixed(std::string* out, std::string_view v, size_t width) {
  out->append(v.substr(0, width));
  out->append(width - std::min(width, v.size()), '\0');
}

void PutNamespace(std::string* out, const NamespaceView& ns) {
  PutFixed(out, ns.id, kKeyBytes);
  PutFixed(out, ns.model_fingerprint, 64);
  Put16(out, ns.format_version);
}

NamespaceView GetNamespace(std::string_view body) {
  return {body.substr(0, kKeyBytes), body.substr(kKeyBytes, 64), Load16(U8(body) + kKeyBytes + 64)};
}

size_t MaxBodyBytes(Op op, size_t max_keys) {
  switch (op) {
    case Op::kPut: return kPutFixed + kMaxUnitBytes;
    case Op::kGet: return kGetFixed + max_keys * kKeyBytes;
    case Op::kPutOk: return 0;
    case Op::kUnit: return kUnitFixed + kMaxUnitBytes;
    case Op::kError: return 4 + kMaxErrorMessage;
  }
  return 0;
}

bool IsRequest(Op op) { return op == Op::kPut || op == Op::kGet; }
bool IsResponse(Op op) { return op == Op::kPutOk || op == Op::kUnit || op == Op::kError; }

}  // namespace

StatusOr<Header> ParseHeader(const std::array<uint8_t, kHeaderBytes>& b, bool requests, size_t max_keys) {
  return ParseHeader(reinterpret_cast<const char*>(b.data()), requests, max_keys);
}

StatusOr<Header> ParseHeader(const char* bytes, bool requests, size_t max_keys) {
  const uint8_t* b = reinterpret_cast<const uint8_t*>(bytes);
  if (Load32(b) != kMagic) return InvalidArgumentError("bad magic");
  if (b[4] != kWireVersion) return InvalidArgumentError("wire version " + std::to_string(b[4]) + " is not spoken here");
  Header h;
  h.op = static_cast<Op>(b[5]);
  if (requests ? !IsRequest(h.op) : !IsResponse(h.op)) return InvalidArgumentError("unexpected opcode " + std::to_string(b[5]));
  h.flags = b[6];
  if ((h.flags & ~(h.op == Op::kError ? kFlagFatal : 0)) != 0 || b[7] != 0) return InvalidArgumentError("unknown flags");
  h.id = Load32(b + 8);
  h.body_length = Load32(b + 12);
  if (h.body_length > MaxBodyBytes(h.op, max_keys))
    return InvalidArgumentError("body of " + std::to_string(h.body_length) + " bytes exceeds the opcode's bound");
  return h;
}

StatusOr<PutView> ParsePut(std::string_view body) {
  if (body.size() < kPutFixed) return InvalidArgumentError("PUT body too short");
  const uint8_t has_parent = U8(body)[kNamespaceBytes + kKeyBytes];
  if (has_parent > 1) return InvalidArgumentError("PUT parent flag must be 0 or 1");
  const std::string_view parent = body.substr(kNamespaceBytes + kKeyBytes + 1, kKeyBytes);
  // Zeros when there is none (as EncodePutPrefix writes): bytes there would be read by nobody, and
  // a frame must mean one thing to every reader.
  if (!has_parent && parent.find_first_not_of('\0') != std::string_view::npos)
    return InvalidArgumentError("PUT without a parent carries parent bytes");
  PutView v;
  v.ns = GetNamespace(body);
  v.key = body.substr(kNamespaceBytes, kKeyBytes);
  if (has_parent) v.parent = parent;
  v.unit = body.substr(kPutFixed);
  return v;
}

StatusOr<GetView> ParseGet(std::string_view body, size_t max_keys) {
  if (body.size() < kGetFixed) return InvalidArgumentError("GET body too short");
  const uint32_t count = Load32(U8(body) + kNamespaceBytes);
  if (count > max_keys) return InvalidArgumentError("too many keys");
  if (body.size() != kGetFixed + size_t{count} * kKeyBytes) return InvalidArgumentError("GET key count does not match its length");
  return GetView{GetNamespace(body), body.substr(kGetFixed)};
}

StatusOr<UnitView> ParseUnit(std::string_view body) {
  if (body.size() < kUnitFixed) return InvalidArgumentError("UNIT body too short");
  const uint8_t r = U8(body)[kKeyBytes];
  if (r > static_cast<uint8_t>(UnitResult::kReadFailed)) return InvalidArgumentError("UNIT result out of range");
  UnitView v{body.substr(0, kKeyBytes), static_cast<UnitResult>(r), body.substr(kUnitFixed)};
  if (v.result == UnitResult::kMiss && !v.bytes.empty()) return InvalidArgumentError("a missing UNIT carries bytes");
  return v;
}

Status ParseError(std::string_view body) {
  if (body.size() < 4) return InternalError("malformed ERROR frame");
  const uint32_t number = Load32(U8(body));
  return ErrorFromPeer(StatusCodeFromNumber(number), number, std::string(body.substr(4)));
}

std::string EncodeHeader(Op op, uint32_t id, size_t body_length, uint8_t flags) {
  std::string h;
  h.reserve(kHeaderBytes);
  Put32(&h, kMagic);
  h.push_back(static_cast<char>(kWireVersion));
  h.push_back(static_cast<char>(op));
  h.push_back(static_cast<char>(flags));
  h.push_back('\0');
  Put32(&h, id);
  Put32(&h, static_cast<uint32_t>(body_length));
  return h;
}

std::string EncodePutPrefix(uint32_t id, const NamespaceView& ns, std::string_view key, std::string_view parent,
                            size_t unit_bytes) {
  std::string f = EncodeHeader(Op::kPut, id, kPutFixed + unit_bytes);
  PutNamespace(&f, ns);
  PutFixed(&f, key, kKeyBytes);
  f.push_back(parent.empty() ? '\0' : '\1');
  PutFixed(&f, parent, kKeyBytes);
  return f;
}

std::string EncodeGet(uint32_t id, const NamespaceView& ns, const std::string& keys) {
  std::string f = EncodeHeader(Op::kGet, id, kGetFixed + keys.size());
  PutNamespace(&f, ns);
  Put32(&f, static_cast<uint32_t>(keys.size() / kKeyBytes));
  f += keys;
  return f;
}

std::string EncodePutOk(uint32_t id) { return EncodeHeader(Op::kPutOk, id, 0); }

std::string EncodeUnitPrefix(uint32_t id, std::string_view key, UnitResult result, size_t bytes) {
  std::string f = EncodeHeader(Op::kUnit, id, kUnitFixed + bytes);
  PutFixed(&f, key, kKeyBytes);
  f.push_back(static_cast<char>(result));
  return f;
}

std::string EncodeError(uint32_t id, const Status& status, bool fatal) {
  const std::string_view msg = std::string_view(status.message()).substr(0, kMaxErrorMessage);
  std::string f = EncodeHeader(Op::kError, id, 4 + msg.size(), fatal ? kFlagFatal : 0);
  Put32(&f, static_cast<uint32_t>(ErrorMappingOf(status.code()).code));  // a code outside the enum goes as UNKNOWN
  f.append(msg);
  return f;
}

}  // namespace ds41::wire
