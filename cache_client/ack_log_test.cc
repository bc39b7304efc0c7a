#include "cache_client/ack_log.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "cache_client/cache_client.h"
#include "util/crc32c.h"

namespace ds41 {
namespace {

UnitKey KeyOf(uint8_t b) {
  UnitKey k{};
  k.fill(b);
  return k;
}

TEST(AckLogTest, RecordsOnlyTheAcknowledgedUnitsAndParsesThemBack) {
  const std::string path = testing::TempDir() + "/ack_log_test." + std::to_string(getpid());
  std::remove(path.c_str());
  const CacheNamespace ns = CacheNamespace::Make(std::string(64, 'a'), "salt");
  const std::vector<UnitPut> units = {{KeyOf(1), std::nullopt, "first unit"},
                                      {KeyOf(2), KeyOf(1), "a tail"},
                                      {KeyOf(3), std::nullopt, "not acknowledged"}};
  {
    auto log = AckLog::Open(path);
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    (*log)->Record(ns, units, {0, 1});
    (*log)->Record(ns, units, {});
  }
  std::ifstream in(path);
  std::vector<AckedUnit> got;
  for (std::string line; std::getline(in, line);) {
    auto u = ParseAckLine(line);
    ASSERT_TRUE(u.ok()) << u.status().ToString();
    got.push_back(*u);
  }
  ASSERT_EQ(got.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(got[i].ns_id, ns.id);
    EXPECT_EQ(got[i].model_fingerprint, ns.model_fingerprint);
    EXPECT_EQ(got[i].format_version, ns.format_version);
    EXPECT_EQ(got[i].key, units[i].key);
    EXPECT_EQ(got[i].parent, units[i].parent);
    EXPECT_EQ(got[i].crc32c, Crc32c(units[i].bytes.data(), units[i].bytes.size()));
    EXPECT_EQ(got[i].bytes, units[i].bytes.size());
  }
  std::remove(path.c_str());
}

TEST(AckLogTest, ATornLineIsRefused) {
  EXPECT_FALSE(ParseAckLine("").ok());
  EXPECT_FALSE(ParseAckLine(std::string(64, '0') + " " + std::string(64, '1')).ok());
  const std::string whole = std::string(64, '0') + " " + std::string(64, 'a') + " 1 " + std::string(64, '2') +
                            " - 0badf00d 42";
  EXPECT_TRUE(ParseAckLine(whole).ok());
  EXPECT_FALSE(ParseAckLine(whole.substr(0, whole.size() - 9)).ok());
  EXPECT_FALSE(ParseAckLine(std::string(64, '0') + " " + std::string(64, 'a') + " 1 " + std::string(64, '2') +
                            " - 0badf00g 42").ok());
}

}  // namespace
}  // namespace ds41
