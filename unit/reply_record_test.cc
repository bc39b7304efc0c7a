#include "unit/reply_record.h"

#include <gtest/gtest.h>

#include "unit/unit_format.h"
#include "unit/unit_key.h"

namespace ds41 {
namespace {

Fingerprint Model(uint8_t seed) {
  Fingerprint f{};
  for (size_t i = 0; i < f.size(); ++i) f[i] = static_cast<uint8_t>(seed + i);
  return f;
}

TEST(ReplyRecordTest, RoundTrip) {
  const std::vector<int32_t> ids = {0, 1, 7, 129279, 42};
  const std::string b = EncodeReplyRecord(Model(1), ids);
  EXPECT_TRUE(IsReplyRecord(b));
  EXPECT_EQ(b.size(), 48u + 4 * ids.size() + 4);
  auto h = VerifyReplyRecordBytes(b);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->count, ids.size());
  EXPECT_EQ(h->model, Model(1));
  auto back = DecodeReplyRecord(b, Model(1), 129280);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, ids);
}

TEST(ReplyRecordTest, EveryFlippedByteIsCaught) {
  const std::string good = EncodeReplyRecord(Model(1), {5, 6, 7});
  for (size_t i = 0; i < good.size(); ++i) {
    std::string bad = good;
    bad[i] ^= 0x20;
    EXPECT_FALSE(DecodeReplyRecord(bad, Model(1), 100).ok()) << "byte " << i;
  }
  for (size_t n = 0; n < good.size(); ++n) EXPECT_FALSE(VerifyReplyRecordBytes(good.substr(0, n)).ok()) << n;
}

TEST(ReplyRecordTest, OtherModelOrVocabularyIsRefused) {
  const std::string b = EncodeReplyRecord(Model(1), {5, 99});
  EXPECT_EQ(DecodeReplyRecord(b, Model(2), 100).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(DecodeReplyRecord(b, Model(1), 99).status().code(), StatusCode::kDataLoss);
  EXPECT_TRUE(DecodeReplyRecord(b, Model(1), 100).ok());
}

TEST(ReplyRecordTest, UnitsAndRecordsAreToldApart) {
  EXPECT_FALSE(IsReplyRecord("DS41UNIT................................................"));
  EXPECT_FALSE(VerifyUnitBytes(EncodeReplyRecord(Model(1), {1})).ok());
}

TEST(ReplyRecordTest, KeysSeparateTenantsAndDigests) {
  const UnitKey a = NamespaceRoot(Model(1), kUnitFormatVersion, "tenant-a");
  const UnitKey b = NamespaceRoot(Model(1), kUnitFormatVersion, "tenant-b");
  std::array<uint8_t, 32> d1{}, d2{};
  d2[31] = 1;
  EXPECT_NE(ReplyKey(a, d1), ReplyKey(b, d1));
  EXPECT_NE(ReplyKey(a, d1), ReplyKey(a, d2));
  EXPECT_EQ(ReplyKey(a, d1), ReplyKey(a, d1));
  // Never a chain key: the domains differ even for the same bytes.
  EXPECT_NE(ReplyKey(a, d1), ChainKey(a, nullptr, 0));
}

}  // namespace
}  // namespace ds41
