// Session bindings and the marks placement takes from them (moved out of RouterCore so the
// simulator decides with the same code).
#include "router/session_bindings.h"

#include <gtest/gtest.h>

namespace ds41 {
namespace {

TEST(SessionBindingsTest, HolderIsTheDecoderAtItsEndElseTheEncoderAtThePromptEnd) {
  SessionBindings b(10);
  b.Bind("s", "d1", 140, "e1", 100);
  EXPECT_EQ(b.SwaHolder("s", 140), "d1");
  EXPECT_EQ(b.SwaHolder("s", 100), "e1");
  EXPECT_EQ(b.SwaHolder("s", 120), "");
  EXPECT_EQ(b.SwaHolder("other", 140), "");
  EXPECT_EQ(b.SwaHolder("", 140), "");
  EXPECT_EQ(b.SwaHolder("s", 0), "");
}

TEST(SessionBindingsTest, AStoppedTurnKeepsOnlyTheEncodersRecord) {
  SessionBindings b(10);
  b.Bind("s", "d1", 140, "e1", 100);
  b.Bind("s", "", -1, "e2", 200);  // stopped: the decoder freed the sequence
  EXPECT_EQ(b.SwaHolder("s", 140), "");
  EXPECT_EQ(b.SwaHolder("s", 200), "e2");
  b.Bind("s", "d2", 260, "", 0);  // no encoder (N == H): the encoder's record stays
  EXPECT_EQ(b.SwaHolder("s", 200), "e2");
  EXPECT_EQ(b.SwaHolder("s", 260), "d2");
}

TEST(SessionBindingsTest, KeepsTheMostRecentlyBoundSessions) {
  SessionBindings b(2);
  b.Bind("a", "d", 10, "e", 5);
  b.Bind("b", "d", 10, "e", 5);
  EXPECT_EQ(b.Bind("a", "d", 11, "e", 5), 2u);  // a is now the most recent
  EXPECT_EQ(b.Bind("c", "d", 10, "e", 5), 2u);  // b goes
  EXPECT_EQ(b.SwaHolder("a", 11), "d");
  EXPECT_EQ(b.SwaHolder("b", 10), "");
  EXPECT_EQ(b.SwaHolder("c", 10), "d");
}

TEST(SessionBindingsTest, WarmOnlyAtExactlyHOrWhenBound) {
  EXPECT_TRUE(DecoderWarmAt(128, 128, false));
  EXPECT_FALSE(DecoderWarmAt(140, 128, false));  // an older or longer turn is not warm
  EXPECT_FALSE(DecoderWarmAt(-1, 128, false));
  EXPECT_TRUE(DecoderWarmAt(-1, 128, true));
}

TEST(SessionBindingsTest, SwaPeerAndAvailability) {
  EXPECT_EQ(SwaPeer("e1", "d1", 64), "e1");
  EXPECT_EQ(SwaPeer("", "d1", 64), "d1");
  EXPECT_EQ(SwaPeer("", "d1", 0), "");
  EXPECT_TRUE(SwaAvailable(0, ""));
  EXPECT_FALSE(SwaAvailable(64, ""));
  EXPECT_TRUE(SwaAvailable(64, "d1"));
}

}  // namespace
}  // namespace ds41
