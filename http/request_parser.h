// HttpRequestParser: the request side of HTTP/1.1 framing over Node's http_parser, with no I/O:
// bytes in, whole requests (or the error to answer) out. The server's connections feed it what
// they read; the fuzz harness (fuzz/http_request_fuzzer.cc) feeds it arbitrary bytes, so every
// byte a client can send reaches this class first.
//
// Limits: the request line plus headers may not exceed max_header_bytes (431), a body may not
// exceed max_body_bytes (413, refused from Content-Length before any body byte when it says so);
// only HTTP/1.0 and 1.1 are accepted (505); an Expect other than 100-continue is 417; any other
// malformation is 400. After an error the parser is spent: the connection answers and closes.
//
// Thread-compatible: one per connection, used by one thread (the connection's strand) at a time.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "http/http_types.h"

struct http_parser;  // http/http_parser_include.h; kept out of this header

namespace ds41 {

// What the connection does at each step of a request (timers, the interim 100 Continue). The
// default does nothing, which is what a harness wants.
class HttpParseEvents {
 public:
  virtual ~HttpParseEvents() = default;
  virtual void OnRequestBegin() {}
  // Headers are complete; `send_continue`: the client waits for "100 Continue" before its body.
  virtual void OnHeadersComplete(bool send_continue) {}
  virtual void OnRequestComplete() {}
};

struct HttpParseError {
  int status = 400;   // 400, 413, 417, 431 or 505
  std::string message;
  std::string code;   // the OpenAI-shaped error's code ("bad_request", "request_too_large", ...)
};

class HttpRequestParser {
 public:
  enum class Result {
    kNeedMore,  // every byte given was consumed; no request is complete yet
    kRequest,   // a request is complete: TakeRequest(); bytes after it were not consumed
    kError,     // error(); the parser accepts nothing more
  };

  // `events` may be null; else it must outlive the parser.
  HttpRequestParser(size_t max_header_bytes, size_t max_body_bytes, HttpParseEvents* events = nullptr);
  ~HttpRequestParser();
  HttpRequestParser(const HttpRequestParser&) = delete;
  HttpRequestParser& operator=(const HttpRequestParser&) = delete;

  // Parses from the front of [data, data + n) and sets *used to the bytes consumed. Stops after
  // one complete request, so pipelined requests are taken one at a time (the next Parse resumes
  // with the bytes after it).
  Result Parse(const char* data, size_t n, size_t* used);

  // The request that Parse just completed, moved out. REQUIRES: Parse returned kRequest.
  HttpRequest TakeRequest();
  // Whether the connection may persist after the request just completed (HTTP/1.1 without
  // "Connection: close", 1.0 with keep-alive, never after an Upgrade).
  bool keep_alive() const { return keep_alive_; }
  // True between a request's first byte and its end (or an error).
  bool in_request() const { return in_request_; }
  // REQUIRES: Parse returned kError.
  const HttpParseError& error() const { return error_; }

 private:
  struct Callbacks;  // http_parser's C callbacks, friends of this class
  bool AddHeaderBytes(size_t n);

  const size_t max_header_bytes_;
  const size_t max_body_bytes_;
  HttpParseEvents* const events_;
  std::unique_ptr<http_parser> parser_;
  bool failed_ = false;

  // The request being parsed.
  HttpRequest cur_;
  std::string url_;
  std::vector<std::pair<std::string, std::string>> raw_headers_;
  bool in_field_ = false;
  size_t header_bytes_ = 0;
  bool in_request_ = false;
  bool request_ready_ = false;
  bool keep_alive_ = true;
  int error_status_ = 0;  // set by a callback that failed the parse on purpose (413/417/431/505)
  HttpParseError error_;
};

}  // namespace ds41
