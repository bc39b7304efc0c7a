// The cache's bulk data path: the binary framing that carries unit payloads for Put and Get over a
// plain (or TLS) TCP stream beside gRPC, which stays the control plane (docs/cache_data_path.md).
// Pure encoding and parsing: no I/O. Every length is checked against a fixed bound before it is
// trusted, so a parser fed arbitrary bytes never reads out of range or allocates unboundedly.
// Thread-safe: pure functions.
//
// Frame = 16-byte header, then `body_length` bytes. All integers little-endian.
//   0  u32 magic 0x44344244 ("DB4D" on the wire)   8  u32 request id (echoed by every response)
//   4  u8  version (kWireVersion)                 12  u32 body length
//   5  u8  opcode   6  u8 flags (kFlagFatal on ERROR only)   7  u8 reserved (0)
// Namespace block (98 B): 32 B id | 64 B fingerprint (hex ASCII) | u16 unit format version.
//   PUT    0x01  ns | 32 B key | u8 has_parent | 32 B parent (zeros if none: checked) | unit bytes
//   GET    0x02  ns | u32 count | count x 32 B key
//   PUT_OK 0x81  (empty): the unit is committed, as durable as an acknowledged gRPC Put
//   UNIT   0x82  32 B key | u8 result (0 miss, 1 found, 2 read failed) | unit bytes or message
//   ERROR  0xFF  u32 status code (util/status.h) | message. Answers a whole request; with
//                kFlagFatal it reports a protocol error and the server closes the connection.
//                A number no error code has (OK included) is read as UNKNOWN (util/error_table.h).
// Responses come in request order: PUT -> PUT_OK or ERROR; GET -> `count` UNIT frames, or one ERROR.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "unit/unit_format.h"
#include "util/status.h"

namespace ds41::wire {

inline constexpr uint32_t kMagic = 0x44344244;
inline constexpr uint8_t kWireVersion = 1;
inline constexpr size_t kHeaderBytes = 16;
inline constexpr size_t kNamespaceBytes = 98;
inline constexpr size_t kKeyBytes = 32;
inline constexpr uint8_t kFlagFatal = 1;
inline constexpr size_t kMaxErrorMessage = 1024;

enum class Op : uint8_t { kPut = 0x01, kGet = 0x02, kPutOk = 0x81, kUnit = 0x82, kError = 0xFF };
enum class UnitResult : uint8_t { kMiss = 0, kFound = 1, kReadFailed = 2 };

struct Header {
  Op op = Op::kError;
  uint8_t flags = 0;
  uint32_t id = 0;
  uint32_t body_length = 0;
};

struct NamespaceView {
  std::string_view id;                 // 32 bytes
  std::string_view model_fingerprint;  // 64 hex characters (checked by the service, not here)
  uint16_t format_version = 0;
};

struct PutView {
  NamespaceView ns;
  std::string_view key;     // 32 bytes
  std::string_view parent;  // 32 bytes for a tail, else empty
  std::string_view unit;
};

struct GetView {
  NamespaceView ns;
  std::string_view keys;    // count x 32 bytes
  size_t count() const { return keys.size() / kKeyBytes; }
  std::string_view key(size_t i) const { return keys.substr(i * kKeyBytes, kKeyBytes); }
};

struct UnitView {
  std::string_view key;
  UnitResult result = UnitResult::kMiss;
  std::string_view bytes;   // the unit (found) or the failure message (read failed)
};

// Checks magic, version, opcode, flags and the body bound of its opcode (docs/cache_data_path.md;
// GET's grows with `max_keys`), so a length is refused before any body byte is read. `requests`
// selects which side's opcodes are acceptable (PUT/GET for a server, the responses for a client).
StatusOr<Header> ParseHeader(const std::array<uint8_t, kHeaderBytes>& bytes, bool requests, size_t max_keys);
// The same for the kHeaderBytes bytes at `bytes` (a header inside a read buffer).
StatusOr<Header> ParseHeader(const char* bytes, bool requests, size_t max_keys);

// Body parsers: the views point into `body`, which must outlive them.
StatusOr<PutView> ParsePut(std::string_view body);
StatusOr<GetView> ParseGet(std::string_view body, size_t max_keys);
StatusOr<UnitView> ParseUnit(std::string_view body);
Status ParseError(std::string_view body);  // the carried status (never OK)

// Encoders. The PUT and UNIT encoders return header + fixed fields only: the unit bytes follow
// as a separate buffer, so payloads are sent without a copy.
std::string EncodeHeader(Op op, uint32_t id, size_t body_length, uint8_t flags = 0);
std::string EncodePutPrefix(uint32_t id, const NamespaceView& ns, std::string_view key, std::string_view parent,
                            size_t unit_bytes);
std::string EncodeGet(uint32_t id, const NamespaceView& ns, const std::string& keys);  // keys: count x 32 B
std::string EncodePutOk(uint32_t id);
std::string EncodeUnitPrefix(uint32_t id, std::string_view key, UnitResult result, size_t bytes);
std::string EncodeError(uint32_t id, const Status& status, bool fatal);

}  // namespace ds41::wire
