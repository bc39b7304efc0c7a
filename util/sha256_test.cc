#include "util/sha256.h"

#include <gtest/gtest.h>

namespace ds41 {
namespace {

std::string Hash(const std::string& s) {
  Sha256 h;
  h.Update(s);
  return h.HexDigest();
}

TEST(Sha256Test, FipsVectors) {
  EXPECT_EQ(Hash(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Hash("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Hash("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(Hash(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256Test, SplitUpdatesEqualOne) {
  Sha256 h;
  h.Update("ab");
  h.Update("c");
  EXPECT_EQ(h.HexDigest(), Hash("abc"));
}

TEST(Sha256Test, ACopyGoesOnFromTheSameStateIndependently) {
  Sha256 a;
  a.Update("ab");
  Sha256 b = a;
  Sha256 c;
  c.Update("zz");
  c = a;  // assigned: the state of a, not what c had
  a.Update("c");
  b.Update("d");
  c.Update("e");
  Sha256 moved = std::move(c);
  EXPECT_EQ(a.HexDigest(), Hash("abc"));
  EXPECT_EQ(b.HexDigest(), Hash("abd"));
  EXPECT_EQ(moved.HexDigest(), Hash("abe"));
}

}  // namespace
}  // namespace ds41
