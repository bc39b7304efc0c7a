#include "cache_client/resolve.h"

#include <gtest/gtest.h>

namespace ds41 {
namespace {

using Clock = std::chrono::steady_clock;

TEST(ResolveTest, NumericAddressesNeedNoLookup) {
  // Even with the deadline already passed: nothing is looked up.
  auto v4 = ResolveBefore("127.0.0.1", 7401, Clock::now() - std::chrono::seconds(1));
  ASSERT_TRUE(v4.ok()) << v4.status().ToString();
  ASSERT_EQ(v4->size(), 1u);
  EXPECT_EQ((*v4)[0], asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), 7401));
  auto v6 = ResolveBefore("::1", 80, Clock::now() - std::chrono::seconds(1));
  ASSERT_TRUE(v6.ok());
  EXPECT_TRUE((*v6)[0].address().is_v6());
}

TEST(ResolveTest, NamesAreLookedUpWithThePort) {
  auto r = ResolveBefore("localhost", 7401, Clock::now() + std::chrono::seconds(10));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_FALSE(r->empty());
  for (const auto& e : *r) {
    EXPECT_TRUE(e.address().is_loopback()) << e.address().to_string();
    EXPECT_EQ(e.port(), 7401);
  }
}

TEST(ResolveTest, AFailedOrSlowLookupEndsByTheDeadline) {
  // Wherever this runs (with or without a DNS server) the answer is an error, and it comes by the
  // deadline: NXDOMAIN at once, or DeadlineExceeded while the lookup is still waiting on a server.
  const auto t0 = Clock::now();
  auto r = ResolveBefore("ds41-no-such-host.invalid", 7401, t0 + std::chrono::milliseconds(500));
  EXPECT_LT(Clock::now() - t0, std::chrono::milliseconds(1500));
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().code() == StatusCode::kUnavailable || r.status().code() == StatusCode::kDeadlineExceeded)
      << r.status().ToString();
}

}  // namespace
}  // namespace ds41
