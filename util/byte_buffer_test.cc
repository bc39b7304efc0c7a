#include "util/byte_buffer.h"

#include <gtest/gtest.h>

namespace ds41 {
namespace {

TEST(ByteBufferTest, GrowingKeepsTheBytesWritten) {
  ByteBuffer b;
  EXPECT_EQ(b.size(), 0u);
  b.Resize(3);
  std::memcpy(b.data(), "abc", 3);
  b.Resize(5000);  // reallocates
  b.data()[4999] = 'z';
  EXPECT_EQ(b.view().substr(0, 3), "abc");
  EXPECT_EQ(b.view().back(), 'z');
  b.Resize(2);
  EXPECT_EQ(b.view(), "ab");
}

TEST(ByteBufferTest, MovedFromIsEmptyAndReusable) {
  ByteBuffer a;
  a.Resize(4);
  std::memcpy(a.data(), "wxyz", 4);
  ByteBuffer b = std::move(a);
  EXPECT_EQ(b.view(), "wxyz");
  EXPECT_EQ(a.size(), 0u);  // NOLINT(bugprone-use-after-move): the moved-from state is the contract
  a.Resize(2);
  std::memcpy(a.data(), "ok", 2);
  EXPECT_EQ(a.view(), "ok");
  a.Clear();
  EXPECT_EQ(a.size(), 0u);
}

}  // namespace
}  // namespace ds41
