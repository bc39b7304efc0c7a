#include "util/status.h"

#include <gtest/gtest.h>

namespace ds41 {
namespace {

StatusOr<int> Half(int v) {
  if (v % 2) return InvalidArgumentError("odd");
  return v / 2;
}

Status UseHalf(int v, int* out) {
  DS41_ASSIGN_OR_RETURN(*out, Half(v));
  return Status::Ok();
}

TEST(StatusTest, OkAndErrors) {
  EXPECT_TRUE(Status::Ok().ok());
  Status s = NotFoundError("x");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.ToString(), "NOT_FOUND: x");
  EXPECT_EQ(s.Prefixed("ctx").message(), "ctx: x");
  EXPECT_EQ(Status::Ok().Prefixed("ctx").ToString(), "OK");
}

TEST(StatusTest, AssignOrReturnPropagates) {
  int out = 0;
  EXPECT_TRUE(UseHalf(8, &out).ok());
  EXPECT_EQ(out, 4);
  Status s = UseHalf(7, &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ds41
