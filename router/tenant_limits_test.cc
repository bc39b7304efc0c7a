#include "router/tenant_limits.h"

#include <gtest/gtest.h>

#include <prometheus/text_serializer.h>

namespace ds41 {
namespace {

using Clock = TenantLimits::Clock;

TenantTable Table(const std::string& json) {
  auto t = TenantTable::FromJson(json);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return std::move(*t);
}

const char* kFile = R"({"keys": {"ka": {"tenant": "a"}, "kb": {"tenant": "b"}, "kc": {"tenant": "c"}},
  "tenants": {"a": {"max_running": 2}, "b": {"tokens_per_minute": 600}}})";

TEST(TenantLimitsTest, ATenantHoldsAtMostItsMaxRunningAndOthersAreUntouched) {
  TenantLimits limits(Table(kFile), nullptr);
  int retry = 0;
  auto p1 = limits.Admit("a", &retry);
  auto p2 = limits.Admit("a", &retry);
  ASSERT_TRUE(p1.ok() && p2.ok());
  auto p3 = limits.Admit("a", &retry);
  ASSERT_EQ(p3.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(p3.status().message().find("tenant a has 2 requests in flight (its max_running)"), std::string::npos)
      << p3.status().message();
  EXPECT_EQ(retry, 1);
  // Another tenant, and one without a quota, are admitted however many a holds.
  std::vector<std::unique_ptr<TenantLimits::Place>> others;
  for (int i = 0; i < 50; ++i) {
    auto c = limits.Admit("c", &retry);
    ASSERT_TRUE(c.ok());
    others.push_back(std::move(*c));
  }
  ASSERT_TRUE(limits.Admit("b", &retry).ok());
  // A place given back (released twice: counted once) lets the next one in.
  (*p1)->Release();
  (*p1)->Release();
  auto p4 = limits.Admit("a", &retry);
  ASSERT_TRUE(p4.ok());
  EXPECT_EQ(limits.Admit("a", &retry).status().code(), StatusCode::kResourceExhausted);
  p2->reset();  // destroyed: released
  EXPECT_TRUE(limits.Admit("a", &retry).ok());
}

// The bucket holds one minute's worth and refills at tokens_per_minute / 60 a second; a request is
// admitted while the bucket is not in debt, and the refusal says how long the debt lasts.
TEST(TenantLimitsTest, TokensPerMinuteRefusesInDebtUntilTheBucketRefills) {
  TenantLimits limits(Table(kFile), nullptr);
  const Clock::time_point t0 = Clock::now();
  int retry = 0;
  ASSERT_TRUE(limits.Admit("b", &retry, t0).ok());
  limits.Charge("b", TenantLimits::Tokens::kPrompt, 500, t0);
  ASSERT_TRUE(limits.Admit("b", &retry, t0).ok());  // 100 left
  limits.Charge("b", TenantLimits::Tokens::kCompletion, 400, t0);       // 300 in debt: 30 s at 10 tokens a second
  auto refused = limits.Admit("b", &retry, t0);
  ASSERT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("tenant b is over its tokens_per_minute (600)"), std::string::npos)
      << refused.status().message();
  EXPECT_EQ(retry, 30);
  EXPECT_EQ(limits.Admit("b", &retry, t0 + std::chrono::seconds(29)).status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(retry, 1);
  EXPECT_TRUE(limits.Admit("b", &retry, t0 + std::chrono::seconds(30)).ok());
  // Refilled to one minute's worth at most, however long it rested.
  const Clock::time_point later = t0 + std::chrono::hours(1);
  limits.Charge("b", TenantLimits::Tokens::kPrompt, 601, later);
  EXPECT_EQ(limits.Admit("b", &retry, later).status().code(), StatusCode::kResourceExhausted);
  // Debt stops at one minute's worth: a huge burst locks the tenant out for a minute, no longer.
  const Clock::time_point burst = later + std::chrono::hours(1);
  limits.Charge("b", TenantLimits::Tokens::kPrompt, 1'000'000, burst);
  EXPECT_EQ(limits.Admit("b", &retry, burst).status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(retry, 60);
  EXPECT_TRUE(limits.Admit("b", &retry, burst + std::chrono::seconds(60)).ok());
  // A tenant without a rate is never refused for tokens.
  limits.Charge("c", TenantLimits::Tokens::kPrompt, 1'000'000, t0);
  EXPECT_TRUE(limits.Admit("c", &retry, t0).ok());
}

TEST(TenantLimitsTest, MetricsAreLabelledByTenantNamesNeverKeys) {
  prometheus::Registry registry;
  TenantLimits limits(Table(kFile), &registry);
  int retry = 0;
  auto held = limits.Admit("a", &retry);
  auto held2 = limits.Admit("a", &retry);
  EXPECT_FALSE(limits.Admit("a", &retry).ok());
  limits.Charge("b", TenantLimits::Tokens::kPrompt, 7);
  limits.Charge("b", TenantLimits::Tokens::kCompletion, 3);
  const std::string page = prometheus::TextSerializer().Serialize(registry.Collect());
  EXPECT_NE(page.find(R"(ds41_router_tenant_running_requests{tenant="a"} 2)"), std::string::npos) << page;
  EXPECT_NE(page.find(R"(ds41_router_tenant_rejections_total{reason="max_running",tenant="a"} 1)"), std::string::npos) << page;
  EXPECT_NE(page.find(R"(ds41_router_tenant_tokens_total{kind="prompt",tenant="b"} 7)"), std::string::npos) << page;
  EXPECT_NE(page.find(R"(ds41_router_tenant_tokens_total{kind="completion",tenant="b"} 3)"), std::string::npos) << page;
  for (const char* key : {"ka", "kb", "kc"}) EXPECT_EQ(page.find(std::string("\"") + key + "\""), std::string::npos);
}

TEST(TenantLimitsTest, TheTenantFileRefusesQuotasItCannotApply) {
  for (const char* bad : {
           R"({"keys": {"k": {"tenant": "a"}}, "tenants": {"b": {"max_running": 1}}})",
           R"({"keys": {"k": {"tenant": "a"}}, "tenants": {"a": {"max_running": 0}}})",
           R"({"keys": {"k": {"tenant": "a"}}, "tenants": {"a": {"max_running": "2"}}})",
           R"({"keys": {"k": {"tenant": "a"}}, "tenants": {"a": {"rps": 2}}})",
           R"({"keys": {"k": {"tenant": "a"}}, "tenants": []})",
       }) {
    SCOPED_TRACE(bad);
    EXPECT_EQ(TenantTable::FromJson(bad).status().code(), StatusCode::kInvalidArgument);
  }
  // Open (no keys): one tenant, "default", without a quota.
  const auto quotas = TenantTable().Quotas();
  ASSERT_EQ(quotas.size(), 1u);
  EXPECT_EQ(quotas[0].first, "default");
}

}  // namespace
}  // namespace ds41
