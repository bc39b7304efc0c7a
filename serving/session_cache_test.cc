#include "serving/session_cache.h"

#include <gtest/gtest.h>

#include "engine/config/presets.h"

namespace ds41 {
namespace {

class SessionCacheTest : public ::testing::Test {
 protected:
  // A session holding `n` positions of tokens 0..n-1.
  WarmSession Session(int n, uint8_t ns = 1) {
    WarmSession s;
    s.state = SequenceState::Create(config_);
    s.state.length = n;
    for (int i = 0; i < n; ++i) s.tokens.push_back(i);
    s.ns.fill(ns);
    return s;
  }
  uint64_t OneSession() { return SequenceState::Create(config_).ByteSize(); }
  static UnitKey Ns(uint8_t b) {
    UnitKey k;
    k.fill(b);
    return k;
  }

  ModelConfig config_ = TinyConfig();
  ManualClock clock_;
};

TEST_F(SessionCacheTest, TakeNeedsTheSameNamespaceAndPrefix) {
  SessionCache c(1ull << 40, 60'000, &clock_);
  c.Put("a", Session(10));
  std::vector<int32_t> prompt;
  for (int i = 0; i < 20; ++i) prompt.push_back(i);
  EXPECT_FALSE(c.Take("b", Ns(1), prompt, 8));        // no such session
  EXPECT_FALSE(c.Take("a", Ns(2), prompt, 8));        // another tenant's namespace
  EXPECT_FALSE(c.Take("a", Ns(1), prompt, 12));       // holds less than the boundary
  std::vector<int32_t> other = prompt;
  other[3] = 99;
  EXPECT_FALSE(c.Take("a", Ns(1), other, 8));         // differs inside the boundary
  EXPECT_FALSE(c.Take("a", Ns(1), {0, 1, 2, 3}, 4));  // longer than the prompt
  EXPECT_EQ(c.size(), 1u);                            // a refused take leaves it
  std::optional<WarmSession> s = c.Take("a", Ns(1), prompt, 8);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->state.length, 10);
  EXPECT_EQ(c.size(), 0u);
  EXPECT_EQ(c.bytes(), 0u);
}

TEST_F(SessionCacheTest, BudgetEvictsLeastRecentlyUsedFirst) {
  const uint64_t one = OneSession();
  SessionCache c(3 * one, 60'000, &clock_);
  for (const char* id : {"a", "b", "c"}) {
    c.Put(id, Session(4));
    clock_.AdvanceMs(1);
  }
  EXPECT_EQ(c.bytes(), 3 * one);
  c.Put("a", Session(5));  // a is the newest now
  clock_.AdvanceMs(1);
  c.Put("d", Session(4));  // over budget: b, the oldest, goes
  const auto list = c.List();
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(list[0].first, "d");
  EXPECT_EQ(list[1].first, "a");
  EXPECT_EQ(list[1].second, 5);
  EXPECT_EQ(list[2].first, "c");
  EXPECT_EQ(c.bytes(), 3 * one);
}

TEST_F(SessionCacheTest, ExpiredSessionsGoAtTheNextPut) {
  SessionCache c(1ull << 40, 1'000, &clock_);
  c.Put("old", Session(4));
  clock_.AdvanceMs(600);
  c.Put("mid", Session(4));
  clock_.AdvanceMs(600);  // old is 1.2 s old, mid 0.6 s
  c.Put("new", Session(4));
  const auto list = c.List();
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].first, "new");
  EXPECT_EQ(list[1].first, "mid");
}

TEST_F(SessionCacheTest, ASessionOverTheWholeBudgetIsNotKept) {
  SessionCache c(OneSession() - 1, 60'000, &clock_);
  c.Put("a", Session(4));
  EXPECT_EQ(c.size(), 0u);
  EXPECT_EQ(c.bytes(), 0u);
}

}  // namespace
}  // namespace ds41
