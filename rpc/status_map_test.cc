#include "rpc/status_map.h"

#include <gtest/gtest.h>

#include <iterator>
#include <string>

#include "util/error_table.h"

namespace ds41 {
namespace {

// gRPC's enumerators, named, in ds41 code order: the test does not trust the table's numbers.
const grpc::StatusCode kGrpcOf[] = {
    grpc::StatusCode::OK,                 grpc::StatusCode::CANCELLED,        grpc::StatusCode::UNKNOWN,
    grpc::StatusCode::INVALID_ARGUMENT,   grpc::StatusCode::DEADLINE_EXCEEDED, grpc::StatusCode::NOT_FOUND,
    grpc::StatusCode::ALREADY_EXISTS,     grpc::StatusCode::PERMISSION_DENIED, grpc::StatusCode::RESOURCE_EXHAUSTED,
    grpc::StatusCode::FAILED_PRECONDITION, grpc::StatusCode::ABORTED,         grpc::StatusCode::OUT_OF_RANGE,
    grpc::StatusCode::UNIMPLEMENTED,      grpc::StatusCode::INTERNAL,         grpc::StatusCode::UNAVAILABLE,
    grpc::StatusCode::DATA_LOSS,          grpc::StatusCode::UNAUTHENTICATED,
};

TEST(StatusMapTest, EveryCodeRoundTripsWithItsMessage) {
  ASSERT_EQ(std::size(kGrpcOf), static_cast<size_t>(kStatusCodeCount));
  for (int i = 1; i < kStatusCodeCount; ++i) {
    const Status s(static_cast<StatusCode>(i), "message " + std::to_string(i) + " \xff");
    SCOPED_TRACE(s.ToString());
    const grpc::Status g = ToGrpc(s);
    EXPECT_EQ(g.error_code(), kGrpcOf[i]);
    EXPECT_EQ(g.error_message(), s.message());
    const Status back = FromGrpc(g);
    EXPECT_EQ(back.code(), s.code());
    EXPECT_EQ(back.message(), s.message());
  }
}

TEST(StatusMapTest, OkIsOkBothWays) {
  EXPECT_TRUE(ToGrpc(Status::Ok()).ok());
  EXPECT_TRUE(FromGrpc(grpc::Status::OK).ok());
}

TEST(StatusMapTest, AGrpcCodeNoDs41CodeHasIsUnknownNotOk) {
  for (int n : {-1, 17, 1000}) {
    const Status s = FromGrpc(grpc::Status(static_cast<grpc::StatusCode>(n), "odd"));
    EXPECT_EQ(s.code(), StatusCode::kUnknown) << n;
    EXPECT_NE(s.message().find("status code " + std::to_string(n)), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("odd"), std::string::npos) << s.message();
  }
}

}  // namespace
}  // namespace ds41
