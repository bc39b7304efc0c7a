#include "util/error_table.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <iterator>
#include <set>
#include <string>

namespace ds41 {
namespace {

struct Expected {
  StatusCode code;
  int grpc_code;
  int http_status;
  const char* type;
  const char* openai_code;
  int retry_after_s;
};

// Written out by hand, not from the table: what the front door sent for each code before the table
// existed (OpenAiApi::FromStatus), and gRPC's numbering (grpc/impl/codegen/status.h).
const Expected kExpected[] = {
    {StatusCode::kOk, 0, 200, "", "", 0},
    {StatusCode::kCancelled, 1, 499, "cancelled", "", 0},
    {StatusCode::kUnknown, 2, 500, "internal_error", "", 0},
    {StatusCode::kInvalidArgument, 3, 400, "invalid_request_error", "", 0},
    {StatusCode::kDeadlineExceeded, 4, 504, "timeout", "", 0},
    {StatusCode::kNotFound, 5, 404, "invalid_request_error", "not_found", 0},
    {StatusCode::kAlreadyExists, 6, 500, "internal_error", "", 0},
    {StatusCode::kPermissionDenied, 7, 403, "permission_error", "", 0},
    {StatusCode::kResourceExhausted, 8, 429, "rate_limit_error", "overloaded", 1},
    {StatusCode::kFailedPrecondition, 9, 500, "internal_error", "", 0},
    {StatusCode::kAborted, 10, 500, "internal_error", "", 0},
    {StatusCode::kOutOfRange, 11, 400, "invalid_request_error", "", 0},
    {StatusCode::kUnimplemented, 12, 500, "internal_error", "", 0},
    {StatusCode::kInternal, 13, 500, "internal_error", "", 0},
    {StatusCode::kUnavailable, 14, 503, "service_unavailable", "", 1},
    {StatusCode::kDataLoss, 15, 500, "internal_error", "", 0},
    {StatusCode::kUnauthenticated, 16, 401, "authentication_error", "invalid_api_key", 0},
};

TEST(ErrorTableTest, EveryCodeHasItsRow) {
  ASSERT_EQ(std::size(kExpected), static_cast<size_t>(kStatusCodeCount));
  std::set<int> grpc_codes;
  for (const Expected& e : kExpected) {
    SCOPED_TRACE(StatusCodeName(e.code));
    const ErrorMapping& m = ErrorMappingOf(e.code);
    EXPECT_EQ(&m, &kErrorTable[static_cast<size_t>(e.code)]);
    EXPECT_EQ(m.code, e.code);
    EXPECT_EQ(m.grpc_code, e.grpc_code);
    EXPECT_EQ(m.http_status, e.http_status);
    EXPECT_EQ(m.openai_type, e.type);
    EXPECT_EQ(m.openai_code, e.openai_code);
    EXPECT_EQ(m.retry_after_s, e.retry_after_s);
    grpc_codes.insert(m.grpc_code);
  }
  EXPECT_EQ(grpc_codes.size(), std::size(kExpected)) << "two codes share a gRPC code: the way back would be lossy";
}

TEST(ErrorTableTest, NumbersDecodeToTheirCodeAndNothingElse) {
  for (int i = 0; i < kStatusCodeCount; ++i) {
    ASSERT_TRUE(StatusCodeFromNumber(i).has_value());
    EXPECT_EQ(static_cast<int>(*StatusCodeFromNumber(i)), i);
  }
  for (int64_t n : {int64_t{-1}, int64_t{kStatusCodeCount}, int64_t{255}, int64_t{0xFFFFFFFF}, INT64_MIN}) {
    EXPECT_FALSE(StatusCodeFromNumber(n).has_value()) << n;
  }
  // A value cast from a bad number still has a row to answer with.
  EXPECT_EQ(ErrorMappingOf(static_cast<StatusCode>(99)).code, StatusCode::kUnknown);
}

TEST(ErrorTableTest, GrpcNumbersDecodeThroughTheGrpcColumn) {
  for (const ErrorMapping& m : kErrorTable) EXPECT_EQ(StatusCodeFromGrpc(m.grpc_code), m.code);
  EXPECT_FALSE(StatusCodeFromGrpc(-1).has_value());  // grpc::StatusCode::DO_NOT_USE
  EXPECT_FALSE(StatusCodeFromGrpc(kStatusCodeCount).has_value());
}

TEST(ErrorTableTest, ErrorFromPeerKeepsErrorsAndNeverYieldsOk) {
  for (int i = 1; i < kStatusCodeCount; ++i) {
    const Status s = ErrorFromPeer(StatusCodeFromNumber(i), i, "msg");
    EXPECT_EQ(static_cast<int>(s.code()), i);
    EXPECT_EQ(s.message(), "msg");
  }
  for (int64_t n : {int64_t{0}, int64_t{17}, int64_t{4000000000}, int64_t{-3}}) {
    const Status s = ErrorFromPeer(StatusCodeFromNumber(n), n, "msg");
    EXPECT_EQ(s.code(), StatusCode::kUnknown) << n;
    EXPECT_EQ(s.message(), "the peer sent status code " + std::to_string(n) + ", which is no error code: msg");
  }
}

}  // namespace
}  // namespace ds41
