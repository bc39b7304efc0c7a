// The one table from a ds41::StatusCode to each wire that carries an error: gRPC, the OpenAI-shaped
// HTTP API and the cache data path's ERROR frame (which sends the code's own number). Pure data, no
// gRPC or JSON, so every library answers errors alike; rpc/status_map checks the gRPC column against
// gRPC's enum at compile time.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "util/status.h"

namespace ds41 {

// Codes are numbered 0 .. kStatusCodeCount - 1.
inline constexpr int kStatusCodeCount = 17;

struct ErrorMapping {
  StatusCode code;
  int grpc_code;                 // grpc::StatusCode's value
  int http_status;
  std::string_view openai_type;  // OpenAI's error "type"
  std::string_view openai_code;  // OpenAI's error "code"; empty: null
  // Seconds for Retry-After: the condition is expected to pass, so the same request may succeed
  // later. 0: no header (retrying unchanged does not help, or the client is gone).
  int retry_after_s;
};

// Row i is code i. The HTTP columns are what the front door has always sent (OpenAI's clients raise
// typed errors on 400/401/403/404/429); a code with no HTTP counterpart is the server's fault, 500.
// 499 is nginx's "client closed request": such an answer is counted and logged, rarely read.
inline constexpr std::array<ErrorMapping, kStatusCodeCount> kErrorTable = {{
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
}};

// The row the front door answers `http_status` with (the first code that maps to it: 500 is
// kUnknown's), or nullptr when no code does (405, 408, 413, 431, 505: the HTTP layer's own).
constexpr const ErrorMapping* ErrorMappingOfHttp(int http_status) {
  for (const ErrorMapping& m : kErrorTable) {
    if (m.http_status == http_status && m.code != StatusCode::kOk) return &m;
  }
  return nullptr;
}

// The row of `code`; a value outside the enum (a bad cast) gets kUnknown's row, so it still answers.
constexpr const ErrorMapping& ErrorMappingOf(StatusCode code) {
  const int i = static_cast<int>(code);
  return kErrorTable[i >= 0 && i < kStatusCodeCount ? static_cast<size_t>(i)
                                                    : static_cast<size_t>(StatusCode::kUnknown)];
}

// Decoding a peer's number: nullopt when no code has it. The data path sends the code's own number;
// gRPC's is the table's gRPC column.
std::optional<StatusCode> StatusCodeFromNumber(int64_t number);
std::optional<StatusCode> StatusCodeFromGrpc(int64_t grpc_code);

// The error a peer sent as `number`, decoded to `code`. A number that names no error (OK included)
// is UNKNOWN, its message saying which number came: a broken or newer peer's error stays an error
// and is never taken for success.
Status ErrorFromPeer(std::optional<StatusCode> code, int64_t number, std::string message);

}  // namespace ds41
