#include "unit/reply_record.h"

#include <cstring>

#include "util/crc32c.h"

namespace ds41 {
namespace {

constexpr char kMagic[8] = {'D', 'S', '4', '1', 'R', 'P', 'L', 'Y'};
constexpr size_t kHeader = 8 + 2 + 2 + 32 + 4;  // up to and including the count
static_assert(kMaxReplyRecordIds == (kMaxUnitBytes - kHeader - 4) / 4);

uint32_t LoadU32(const char* p) {
  uint8_t b[4];
  std::memcpy(b, p, 4);
  return uint32_t{b[0]} | uint32_t{b[1]} << 8 | uint32_t{b[2]} << 16 | uint32_t{b[3]} << 24;
}

void StoreU32(uint32_t v, std::string* out) {
  const char b[4] = {static_cast<char>(v), static_cast<char>(v >> 8), static_cast<char>(v >> 16),
                     static_cast<char>(v >> 24)};
  out->append(b, 4);
}

}  // namespace

bool IsReplyRecord(std::string_view b) { return b.size() >= sizeof(kMagic) && std::memcmp(b.data(), kMagic, sizeof(kMagic)) == 0; }

std::string EncodeReplyRecord(const Fingerprint& model, const std::vector<int32_t>& ids) {
  std::string out(kMagic, sizeof(kMagic));
  out.push_back(static_cast<char>(kReplyRecordVersion & 0xff));
  out.push_back(static_cast<char>(kReplyRecordVersion >> 8));
  out.append(2, '\0');
  out.append(reinterpret_cast<const char*>(model.data()), model.size());
  StoreU32(static_cast<uint32_t>(ids.size()), &out);
  out.reserve(out.size() + 4 * ids.size() + 4);
  for (int32_t id : ids) StoreU32(static_cast<uint32_t>(id), &out);
  StoreU32(Crc32c(out.data(), out.size()), &out);
  return out;
}

StatusOr<ReplyRecordHeader> VerifyReplyRecordBytes(std::string_view b) {
  if (!IsReplyRecord(b) || b.size() < kHeader + 4) return InvalidArgumentError("not a reply record (bad magic or too short)");
  if (b.size() > kMaxUnitBytes) return InvalidArgumentError("reply record of " + std::to_string(b.size()) + " bytes exceeds the limit");
  if (Crc32c(b.data(), b.size() - 4) != LoadU32(b.data() + b.size() - 4)) return DataLossError("reply record checksum mismatch");
  const uint16_t version = static_cast<uint16_t>(static_cast<uint8_t>(b[8]) | static_cast<uint8_t>(b[9]) << 8);
  if (version != kReplyRecordVersion) {
    return InvalidArgumentError("reply record version " + std::to_string(version) + " is not supported");
  }
  ReplyRecordHeader h;
  std::memcpy(h.model.data(), b.data() + 12, h.model.size());
  h.count = LoadU32(b.data() + 44);
  if (h.count == 0 || h.count > kMaxReplyRecordIds || b.size() != kHeader + 4 * size_t{h.count} + 4) {
    return DataLossError("reply record size does not match its count");
  }
  return h;
}

StatusOr<StoredHeader> VerifyStoredBytes(std::string_view b) {
  if (IsReplyRecord(b)) {
    DS41_ASSIGN_OR_RETURN(ReplyRecordHeader r, VerifyReplyRecordBytes(b));
    return StoredHeader{r.model, r.count, false};
  }
  DS41_ASSIGN_OR_RETURN(UnitHeader u, VerifyUnitBytes(b));
  return StoredHeader{u.model, static_cast<uint32_t>(u.tokens), u.tail};
}

StatusOr<std::vector<int32_t>> DecodeReplyRecord(std::string_view b, const Fingerprint& model, int32_t vocab) {
  DS41_ASSIGN_OR_RETURN(ReplyRecordHeader h, VerifyReplyRecordBytes(b));
  if (h.model != model) return InvalidArgumentError("reply record was made by another model");
  std::vector<int32_t> ids(h.count);
  for (uint32_t i = 0; i < h.count; ++i) {
    const uint32_t v = LoadU32(b.data() + kHeader + 4 * size_t{i});
    if (v >= static_cast<uint32_t>(vocab)) return DataLossError("reply record holds an id outside the vocabulary");
    ids[i] = static_cast<int32_t>(v);
  }
  return ids;
}

}  // namespace ds41
