#include "http/request_parser.h"

#include <limits>

#include "http/http_parser_include.h"

namespace ds41 {

struct HttpRequestParser::Callbacks {
  static HttpRequestParser* Self(http_parser* p) { return static_cast<HttpRequestParser*>(p->data); }

  static const http_parser_settings& Settings() {
    static const http_parser_settings settings = [] {
      http_parser_settings s;
      http_parser_settings_init(&s);
      s.on_message_begin = &OnMessageBegin;
      s.on_url = &OnUrl;
      s.on_header_field = &OnHeaderField;
      s.on_header_value = &OnHeaderValue;
      s.on_headers_complete = &OnHeadersComplete;
      s.on_body = &OnBody;
      s.on_message_complete = &OnMessageComplete;
      return s;
    }();
    return settings;
  }

  static int OnMessageBegin(http_parser* p) {
    HttpRequestParser* c = Self(p);
    c->cur_ = HttpRequest{};
    c->url_.clear();
    c->raw_headers_.clear();
    c->in_field_ = false;
    c->header_bytes_ = 0;
    c->error_status_ = 0;
    c->in_request_ = true;
    if (c->events_) c->events_->OnRequestBegin();
    return 0;
  }

  static int OnUrl(http_parser* p, const char* at, size_t n) {
    HttpRequestParser* c = Self(p);
    if (!c->AddHeaderBytes(n)) return 1;
    c->url_.append(at, n);
    return 0;
  }

  static int OnHeaderField(http_parser* p, const char* at, size_t n) {
    HttpRequestParser* c = Self(p);
    if (!c->AddHeaderBytes(n)) return 1;
    if (!c->in_field_) {
      c->raw_headers_.emplace_back();
      c->in_field_ = true;
    }
    c->raw_headers_.back().first.append(at, n);
    return 0;
  }

  static int OnHeaderValue(http_parser* p, const char* at, size_t n) {
    HttpRequestParser* c = Self(p);
    if (!c->AddHeaderBytes(n)) return 1;
    c->in_field_ = false;
    if (c->raw_headers_.empty()) return 1;  // value without a field cannot happen; refuse anyway
    c->raw_headers_.back().second.append(at, n);
    return 0;
  }

  static int OnHeadersComplete(http_parser* p) {
    HttpRequestParser* c = Self(p);
    // http_parser accepts any one-digit version; answering HTTP/9.9 as if it were 1.1 would be a lie.
    if (p->http_major != 1 || p->http_minor > 1) {
      c->error_status_ = 505;
      return -1;
    }
    HttpRequest& r = c->cur_;
    r.method = http_method_str(static_cast<http_method>(p->method));
    r.http_major = p->http_major;
    r.http_minor = p->http_minor;
    for (auto& [k, v] : c->raw_headers_) r.headers.Add(std::move(k), std::move(v));
    c->raw_headers_.clear();
    // Origin-form "/path?query#frag"; absolute-form targets are split by http_parser's URL parser.
    std::string_view url = c->url_;
    if (!url.empty() && url.front() != '/' && url != "*") {
      http_parser_url u;
      http_parser_url_init(&u);
      if (http_parser_parse_url(c->url_.data(), c->url_.size(), 0, &u) == 0 && (u.field_set & (1 << UF_PATH))) {
        url = std::string_view(c->url_).substr(u.field_data[UF_PATH].off);
      }
    }
    if (auto h = url.find('#'); h != std::string_view::npos) url = url.substr(0, h);
    if (auto q = url.find('?'); q != std::string_view::npos) {
      r.query = std::string(url.substr(q + 1));
      url = url.substr(0, q);
    }
    r.path = std::string(url);

    const bool chunked = (p->flags & F_CHUNKED) != 0;
    const bool has_length = p->content_length != std::numeric_limits<uint64_t>::max();
    if (!chunked && has_length && p->content_length > c->max_body_bytes_) {
      c->error_status_ = 413;
      return -1;
    }
    bool send_continue = false;
    if (auto expect = r.headers.Get("Expect")) {
      if (!EqualsIgnoreCase(*expect, "100-continue")) {
        c->error_status_ = 417;
        return -1;
      }
      // Only 1.1 clients wait for it, and only when a body follows.
      send_continue = p->http_minor >= 1 && (chunked || (has_length && p->content_length > 0));
    }
    c->keep_alive_ = http_should_keep_alive(p) != 0;
    if (c->events_) c->events_->OnHeadersComplete(send_continue);
    return 0;
  }

  static int OnBody(http_parser* p, const char* at, size_t n) {
    HttpRequestParser* c = Self(p);
    if (c->cur_.body.size() + n > c->max_body_bytes_) {
      c->error_status_ = 413;
      return 1;
    }
    c->cur_.body.append(at, n);
    return 0;
  }

  static int OnMessageComplete(http_parser* p) {
    HttpRequestParser* c = Self(p);
    c->in_request_ = false;
    c->request_ready_ = true;
    if (p->upgrade) c->keep_alive_ = false;  // we speak no other protocol; end after the answer
    if (c->events_) c->events_->OnRequestComplete();
    // Stop here so the next pipelined request is parsed only after this one is taken.
    http_parser_pause(p, 1);
    return 0;
  }
};

HttpRequestParser::HttpRequestParser(size_t max_header_bytes, size_t max_body_bytes, HttpParseEvents* events)
    : max_header_bytes_(max_header_bytes),
      max_body_bytes_(max_body_bytes),
      events_(events),
      parser_(std::make_unique<http_parser>()) {
  http_parser_init(parser_.get(), HTTP_REQUEST);
  parser_->data = this;
}

HttpRequestParser::~HttpRequestParser() = default;

bool HttpRequestParser::AddHeaderBytes(size_t n) {
  header_bytes_ += n;
  if (header_bytes_ > max_header_bytes_) {
    error_status_ = 431;
    return false;
  }
  return true;
}

HttpRequestParser::Result HttpRequestParser::Parse(const char* data, size_t n, size_t* used) {
  *used = 0;
  if (failed_) return Result::kError;
  if (n == 0) return Result::kNeedMore;
  *used = http_parser_execute(parser_.get(), &Callbacks::Settings(), data, n);
  const auto err = HTTP_PARSER_ERRNO(parser_.get());
  if (err == HPE_PAUSED) {
    http_parser_pause(parser_.get(), 0);  // paused only at a request's end: the next Parse resumes
  } else if (err != HPE_OK) {
    failed_ = true;
    in_request_ = false;
    if (error_status_ == 413) {
      error_ = {413, "Request body exceeds " + std::to_string(max_body_bytes_) + " bytes", "request_too_large"};
    } else if (error_status_ == 431 || err == HPE_HEADER_OVERFLOW) {
      error_ = {431, "Request header fields too large", "headers_too_large"};
    } else if (error_status_ == 417) {
      error_ = {417, "Unsupported Expect header", "expectation_failed"};
    } else if (error_status_ == 505) {
      error_ = {505, "Only HTTP/1.0 and HTTP/1.1 are served", "http_version_not_supported"};
    } else {
      error_ = {400, std::string("Malformed HTTP request: ") + http_errno_description(err), "bad_request"};
    }
    return Result::kError;
  }
  if (request_ready_) {
    request_ready_ = false;
    return Result::kRequest;
  }
  return Result::kNeedMore;
}

HttpRequest HttpRequestParser::TakeRequest() {
  HttpRequest r = std::move(cur_);
  cur_ = HttpRequest{};
  return r;
}

}  // namespace ds41
