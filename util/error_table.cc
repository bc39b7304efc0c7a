#include "util/error_table.h"

namespace ds41 {
namespace {

constexpr bool RowsInCodeOrder() {
  for (int i = 0; i < kStatusCodeCount; ++i) {
    if (static_cast<int>(kErrorTable[static_cast<size_t>(i)].code) != i) return false;
  }
  return true;
}
static_assert(RowsInCodeOrder(), "row i of the error table must be StatusCode i");
static_assert(static_cast<int>(StatusCode::kUnauthenticated) == kStatusCodeCount - 1,
              "a new StatusCode needs a row in the error table");

}  // namespace

std::optional<StatusCode> StatusCodeFromNumber(int64_t number) {
  if (number < 0 || number >= kStatusCodeCount) return std::nullopt;
  return static_cast<StatusCode>(number);
}

std::optional<StatusCode> StatusCodeFromGrpc(int64_t grpc_code) {
  for (const ErrorMapping& m : kErrorTable) {
    if (m.grpc_code == grpc_code) return m.code;
  }
  return std::nullopt;
}

Status ErrorFromPeer(std::optional<StatusCode> code, int64_t number, std::string message) {
  if (code && *code != StatusCode::kOk) return Status(*code, std::move(message));
  return Status(StatusCode::kUnknown,
                "the peer sent status code " + std::to_string(number) + ", which is no error code: " + message);
}

}  // namespace ds41
