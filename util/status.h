// ds41::Status and StatusOr<T>: the error type at every library boundary.
//
// Codes are chosen to map one-to-one onto gRPC status codes; util/error_table.h maps them onto every
// wire (gRPC, HTTP, the cache data path). A default-constructed Status is OK. Both types are [[nodiscard]]: dropping an error is a
// compile error under -Werror=unused-result.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace ds41 {

enum class StatusCode : int {
  kOk = 0,
  kCancelled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kAlreadyExists = 6,
  kPermissionDenied = 7,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kAborted = 10,
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
  kDataLoss = 15,
  kUnauthenticated = 16,
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // "INVALID_ARGUMENT: message", or "OK".
  std::string ToString() const;

  // Returns a copy whose message is "context: message" (OK stays OK).
  Status Prefixed(std::string_view context) const;

  // Explicitly discards the status where ignoring it is the intent.
  void IgnoreError() const {}

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgumentError(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status NotFoundError(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status FailedPreconditionError(std::string m) { return {StatusCode::kFailedPrecondition, std::move(m)}; }
inline Status OutOfRangeError(std::string m) { return {StatusCode::kOutOfRange, std::move(m)}; }
inline Status ResourceExhaustedError(std::string m) { return {StatusCode::kResourceExhausted, std::move(m)}; }
inline Status UnavailableError(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status UnauthenticatedError(std::string m) { return {StatusCode::kUnauthenticated, std::move(m)}; }
inline Status PermissionDeniedError(std::string m) { return {StatusCode::kPermissionDenied, std::move(m)}; }
inline Status DataLossError(std::string m) { return {StatusCode::kDataLoss, std::move(m)}; }
inline Status InternalError(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
inline Status UnimplementedError(std::string m) { return {StatusCode::kUnimplemented, std::move(m)}; }
inline Status CancelledError(std::string m) { return {StatusCode::kCancelled, std::move(m)}; }
inline Status DeadlineExceededError(std::string m) { return {StatusCode::kDeadlineExceeded, std::move(m)}; }
inline Status AlreadyExistsError(std::string m) { return {StatusCode::kAlreadyExists, std::move(m)}; }

// Either a value or a non-OK Status.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(Status status) : v_(std::move(status)) {  // NOLINT: implicit by design
    assert(!std::get<Status>(v_).ok() && "StatusOr built from an OK status");
  }
  StatusOr(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design

  bool ok() const { return std::holds_alternative<T>(v_); }
  Status status() const { return ok() ? Status::Ok() : std::get<Status>(v_); }

  // REQUIRES: ok().
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<Status, T> v_;
};

}  // namespace ds41

#define DS41_CONCAT_INNER_(a, b) a##b
#define DS41_CONCAT_(a, b) DS41_CONCAT_INNER_(a, b)

// Returns from the current function when `expr` (a Status) is not OK.
#define DS41_RETURN_IF_ERROR(expr)                  \
  do {                                              \
    ::ds41::Status ds41_status_ = (expr);           \
    if (!ds41_status_.ok()) return ds41_status_;    \
  } while (0)

// `lhs = value of expr` where expr is a StatusOr; returns its Status when it is not OK.
#define DS41_ASSIGN_OR_RETURN(lhs, expr) \
  DS41_ASSIGN_OR_RETURN_IMPL_(DS41_CONCAT_(ds41_statusor_, __LINE__), lhs, expr)
#define DS41_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(tmp).value()
