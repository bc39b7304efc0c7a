#include "http/http_types.h"

#include <nlohmann/json.hpp>

#include "util/error_table.h"

namespace ds41 {

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    unsigned char x = static_cast<unsigned char>(a[i]), y = static_cast<unsigned char>(b[i]);
    if (x >= 'A' && x <= 'Z') x = static_cast<unsigned char>(x + 32);
    if (y >= 'A' && y <= 'Z') y = static_cast<unsigned char>(y + 32);
    if (x != y) return false;
  }
  return true;
}

std::optional<std::string_view> HttpHeaders::Get(std::string_view name) const {
  for (const auto& [k, v] : entries_) {
    if (EqualsIgnoreCase(k, name)) return std::string_view(v);
  }
  return std::nullopt;
}

std::string DefaultErrorFormatter(int http_status, std::string_view message, std::string_view type,
                                  std::string_view code) {
  // Type and default code from the one error table, so the HTTP layer's own answers read as the
  // API's do; a status the table lacks is the client's (4xx, 505) or the server's fault.
  if (const ErrorMapping* m = ErrorMappingOfHttp(http_status)) {
    type = m->openai_type;
    if (code.empty()) code = m->openai_code;
  } else {
    type = http_status < 500 || http_status == 505 ? "invalid_request_error" : "internal_error";
  }
  nlohmann::json err = {{"message", std::string(message)},
                        {"type", std::string(type)},
                        {"param", nullptr},
                        {"code", code.empty() ? nlohmann::json(nullptr) : nlohmann::json(std::string(code))}};
  // Replace invalid UTF-8 (messages may echo client bytes) instead of throwing.
  return nlohmann::json{{"error", err}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string_view HttpStatusReason(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 204: return "No Content";
    case 301: return "Moved Permanently";
    case 302: return "Found";
    case 304: return "Not Modified";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 413: return "Payload Too Large";
    case 415: return "Unsupported Media Type";
    case 417: return "Expectation Failed";
    case 422: return "Unprocessable Entity";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 499: return "Client Closed Request";  // nginx's; the router's answer to a cancelled request
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
  }
}

}  // namespace ds41
