// Plain data shared by the HTTP server and its users: headers, requests, error formatting, metrics.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ds41 {

// ASCII case-insensitive equality, as HTTP field names require.
bool EqualsIgnoreCase(std::string_view a, std::string_view b);

// Ordered header list; lookups ignore case and return the first match. Duplicates are kept.
class HttpHeaders {
 public:
  HttpHeaders() = default;
  HttpHeaders(std::initializer_list<std::pair<std::string, std::string>> init) : entries_(init) {}

  void Add(std::string name, std::string value) { entries_.emplace_back(std::move(name), std::move(value)); }
  std::optional<std::string_view> Get(std::string_view name) const;
  bool Has(std::string_view name) const { return Get(name).has_value(); }
  const std::vector<std::pair<std::string, std::string>>& entries() const { return entries_; }
  bool empty() const { return entries_.empty(); }

 private:
  std::vector<std::pair<std::string, std::string>> entries_;
};

// One fully received request. `path` excludes the query; `query` excludes the '?'.
struct HttpRequest {
  std::string method;
  std::string path;
  std::string query;
  HttpHeaders headers;
  std::string body;  // de-chunked when the client used chunked transfer-encoding
  std::string remote_address;  // "ip:port"
  int http_major = 1;
  int http_minor = 1;
};

// Builds the JSON body of every error the server itself produces (404, 405, 400, 408, 413, 431,
// 503, 500), so all of the front door's errors share one shape.
using ErrorFormatter = std::function<std::string(int http_status, std::string_view message,
                                                 std::string_view type, std::string_view code)>;

// OpenAI shape: {"error":{"message":...,"type":...,"param":null,"code":...}}; empty code -> null.
// The type (and a code when none is given) come from util/error_table.h's row for the status, so
// the server's own 404, 500 or 503 reads as the API's; `type` is used by custom formatters only.
std::string DefaultErrorFormatter(int http_status, std::string_view message, std::string_view type,
                                  std::string_view code);

// "OK", "Not Found", ...; "Unknown" for codes the table lacks.
std::string_view HttpStatusReason(int status);

// Counters updated by the server's io threads; read them from anywhere. Thread-safe (atomics).
struct HttpMetrics {
  std::array<std::atomic<uint64_t>, 6> responses_by_class{};  // index = status / 100 (1..5)
  std::atomic<int64_t> open_connections{0};
  std::atomic<uint64_t> accepted_connections{0};
  std::atomic<uint64_t> rejected_connections{0};  // answered 503 because max_connections was hit
  std::atomic<uint64_t> aborted_responses{0};     // client gone (or forced close) before Finish

  void CountResponse(int status) {
    int c = status / 100;
    if (c >= 1 && c <= 5) responses_by_class[c].fetch_add(1, std::memory_order_relaxed);
  }
  uint64_t responses(int status_class) const {
    return status_class >= 1 && status_class <= 5 ? responses_by_class[status_class].load() : 0;
  }
};

}  // namespace ds41
