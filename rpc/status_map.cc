#include "rpc/status_map.h"

#include "util/error_table.h"

namespace ds41 {
namespace {

// The table's gRPC column against gRPC's own enum: a wrong row fails the build.
constexpr bool GrpcIs(StatusCode code, grpc::StatusCode expected) {
  return ErrorMappingOf(code).grpc_code == static_cast<int>(expected);
}
static_assert(GrpcIs(StatusCode::kOk, grpc::StatusCode::OK));
static_assert(GrpcIs(StatusCode::kCancelled, grpc::StatusCode::CANCELLED));
static_assert(GrpcIs(StatusCode::kUnknown, grpc::StatusCode::UNKNOWN));
static_assert(GrpcIs(StatusCode::kInvalidArgument, grpc::StatusCode::INVALID_ARGUMENT));
static_assert(GrpcIs(StatusCode::kDeadlineExceeded, grpc::StatusCode::DEADLINE_EXCEEDED));
static_assert(GrpcIs(StatusCode::kNotFound, grpc::StatusCode::NOT_FOUND));
static_assert(GrpcIs(StatusCode::kAlreadyExists, grpc::StatusCode::ALREADY_EXISTS));
static_assert(GrpcIs(StatusCode::kPermissionDenied, grpc::StatusCode::PERMISSION_DENIED));
static_assert(GrpcIs(StatusCode::kResourceExhausted, grpc::StatusCode::RESOURCE_EXHAUSTED));
static_assert(GrpcIs(StatusCode::kFailedPrecondition, grpc::StatusCode::FAILED_PRECONDITION));
static_assert(GrpcIs(StatusCode::kAborted, grpc::StatusCode::ABORTED));
static_assert(GrpcIs(StatusCode::kOutOfRange, grpc::StatusCode::OUT_OF_RANGE));
static_assert(GrpcIs(StatusCode::kUnimplemented, grpc::StatusCode::UNIMPLEMENTED));
static_assert(GrpcIs(StatusCode::kInternal, grpc::StatusCode::INTERNAL));
static_assert(GrpcIs(StatusCode::kUnavailable, grpc::StatusCode::UNAVAILABLE));
static_assert(GrpcIs(StatusCode::kDataLoss, grpc::StatusCode::DATA_LOSS));
static_assert(GrpcIs(StatusCode::kUnauthenticated, grpc::StatusCode::UNAUTHENTICATED));

}  // namespace

grpc::Status ToGrpc(const Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(ErrorMappingOf(s.code()).grpc_code), s.message());
}

Status FromGrpc(const grpc::Status& s) {
  if (s.ok()) return Status::Ok();
  const int number = static_cast<int>(s.error_code());
  return ErrorFromPeer(StatusCodeFromGrpc(number), number, s.error_message());
}

}  // namespace ds41
