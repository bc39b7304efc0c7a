// The rate profile's format: comments, defaults, named errors, a round trip.
#include "router/rate_profile.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

namespace ds41 {
namespace {

TEST(RateProfileTest, ReadsCommentsKeepsDefaultsAndNamesBadFields) {
  const std::string path = ::testing::TempDir() + "/profile.json";
  {
    std::ofstream f(path);
    f << "// a header\n{\"name\": \"x\", \"host_cores\": 2, // two\n \"encoder\": {\"token_s\": 0.001}}\n";
  }
  auto p = ReadRateProfile(path);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->name, "x");
  EXPECT_EQ(p->host_cores, 2);
  EXPECT_EQ(p->encoder.token_s, 0.001);
  EXPECT_EQ(p->encoder.step_tokens, 512);  // default kept
  // Round trip.
  auto q = RateProfileFromJson(RateProfileJson(*p));
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(RateProfileJson(*q), RateProfileJson(*p));
  auto bad = RateProfileFromJson(nlohmann::json::parse(R"({"decoder": {"step_s": "fast"}})"));
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("decoder.step_s"), std::string::npos);
  auto negative = RateProfileFromJson(nlohmann::json::parse(R"({"encoder": {"token_s": -1}})"));
  EXPECT_FALSE(negative.ok());
  std::remove(path.c_str());
}

}  // namespace
}  // namespace ds41
