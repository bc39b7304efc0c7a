// Surface: the bytes a client sends to the router's HTTP listener. They go through the request
// framing (http/request_parser.h: request line, headers, Content-Length and chunked bodies, limits)
// and, for each complete request, through the routing table and HttpFront into the OpenAI handling
// (JSON body, tenant from Authorization, x-session-id, timeout headers, validation, rendering,
// tokenization) down to RouterCore, which has no node and refuses (fuzz/front_door.h).
//
// Input: byte 0 picks how the rest arrives (all at once or in pieces of 1..127 bytes, as TCP may
// split it); the rest is the byte stream of one connection, pipelined requests included.
// Properties: no crash; the parser consumes bytes, never more than given, and stops at an error.
#include "fuzz/front_door.h"
#include "fuzz/fuzz_support.h"
#include "http/request_parser.h"

namespace {

constexpr size_t kMaxHeaderBytes = 64 * 1024;  // the server's defaults (http/http_options.h)
constexpr size_t kMaxBodyBytes = 1 << 20;

// The formatter the router gives its server: OpenAI-shaped errors.
const auto kFormatter = std::make_shared<const ds41::ErrorFormatter>(ds41::DefaultErrorFormatter);

void Dispatch(ds41::fuzz::FrontDoor& door, const ds41::HttpRequest& req) {
  // A responder with no connection: what the handlers send is formatted, then dropped.
  auto responder = std::make_shared<ds41::HttpResponder>(std::weak_ptr<ds41::http_internal::Connection>(), kFormatter,
                                                         req.method == "HEAD", /*keep_alive=*/true, /*chunked_ok=*/true);
  door.routes.Dispatch(req, responder);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  ds41::fuzz::FrontDoor& door = ds41::fuzz::FrontDoor::Get();
  const size_t piece = (data[0] & 0x7f) == 0 ? size : (data[0] & 0x7f);
  const char* bytes = reinterpret_cast<const char*>(data + 1);
  const size_t n = size - 1;

  ds41::HttpRequestParser parser(kMaxHeaderBytes, kMaxBodyBytes);
  std::string pending;  // received, not yet parsed (as Connection keeps it)
  size_t fed = 0;
  int requests = 0;
  while (fed < n || !pending.empty()) {
    if (fed < n) {
      const size_t k = std::min(piece, n - fed);
      pending.append(bytes + fed, k);
      fed += k;
    }
    // Parse what is pending: whole requests are dispatched; stop when more bytes are needed.
    while (!pending.empty()) {
      size_t used = 0;
      const auto r = parser.Parse(pending.data(), pending.size(), &used);
      DS41_FUZZ_CHECK(used <= pending.size());
      pending.erase(0, used);
      if (r == ds41::HttpRequestParser::Result::kError) {
        const ds41::HttpParseError& e = parser.error();
        DS41_FUZZ_CHECK(e.status >= 400 && e.status < 600 && !e.message.empty());
        DS41_FUZZ_CHECK(!parser.in_request());
        return 0;  // the connection answers and closes: later bytes are never parsed
      }
      if (r == ds41::HttpRequestParser::Result::kNeedMore) {
        DS41_FUZZ_CHECK(pending.empty());
        break;
      }
      Dispatch(door, parser.TakeRequest());
      if (++requests > 64) return 0;  // a long pipeline teaches nothing more
    }
    if (fed == n) break;
  }
  return 0;
}
