// Reply records: the token ids a model generated for one assistant reply, kept in the cache store
// beside the units of the context they extend (docs/session_reuse.md). A chat request that sends
// the reply back gets these ids spliced into its prompt instead of a re-tokenization of the
// re-rendered text, so the cached context extends through the reply.
//
// Bytes: magic "DS41RPLY" | version (u16 LE) | 0 (u16) | model fingerprint (32 B) | count (u32 LE) |
// count ids (u32 LE) | CRC-32C of everything before it. The store keeps them under ReplyKey
// (unit_key.h), a key no prefix chain can produce, with the units' byte budget and TTL.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "unit/unit_format.h"
#include "util/status.h"

namespace ds41 {

inline constexpr uint16_t kReplyRecordVersion = 1;
// The most ids one record holds (what fits the store's largest value).
inline constexpr size_t kMaxReplyRecordIds = (kMaxUnitBytes - 52) / 4;

// True when `bytes` starts like a reply record (the store then checks it as one, not as a unit).
bool IsReplyRecord(std::string_view bytes);

// REQUIRES: 1 <= ids.size() <= kMaxReplyRecordIds.
std::string EncodeReplyRecord(const Fingerprint& model, const std::vector<int32_t>& ids);

struct ReplyRecordHeader {
  Fingerprint model{};
  uint32_t count = 0;
};

// Framing, version and checksum, as a store checks it: DataLoss for damaged bytes, InvalidArgument
// for anything else malformed.
StatusOr<ReplyRecordHeader> VerifyReplyRecordBytes(std::string_view bytes);

// What a store checks of any value it holds, a unit or a reply record (framing, version,
// checksum), and what it files it by. A reply record is a full value (no parent) of `count` tokens.
struct StoredHeader {
  Fingerprint model{};
  uint32_t tokens = 0;
  bool tail = false;
};
StatusOr<StoredHeader> VerifyStoredBytes(std::string_view bytes);

// Every check: the record must be of `model` and each id below `vocab`.
StatusOr<std::vector<int32_t>> DecodeReplyRecord(std::string_view bytes, const Fingerprint& model, int32_t vocab);

}  // namespace ds41
