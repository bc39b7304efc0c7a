#include "cache_client/data_channel.h"

#include <poll.h>

#include <algorithm>
#include <cstring>

#include "cache_client/resolve.h"

namespace ds41 {

template <typename F>
void DataChannel::WithStream(F&& f) {
  ds41::WithStream(tls_, socket_, std::forward<F>(f));
}

StatusOr<std::unique_ptr<DataChannel>> DataChannel::Connect(const std::string& host, int port,
                                                            const std::shared_ptr<asio::ssl::context>& tls,
                                                            const TransportSecurity& security, Deadline deadline) {
  std::unique_ptr<DataChannel> c(new DataChannel());
  std::error_code ec;
  auto eps = ResolveBefore(host, port, deadline);
  if (!eps.ok()) return Status(eps.status().code(), "data path: " + eps.status().message());
  // Runs the operation started with `done` false until it completes or the deadline passes; in the
  // latter case the socket is closed and the handler (which writes to these locals) drained before
  // returning, so nothing completes into a dead frame later.
  bool done = false;
  auto wait = [&c, &done, deadline] {
    c->io_.restart();
    while (!done && c->io_.run_one_until(deadline) > 0) {
    }
    if (done) return true;
    std::error_code ignored;
    c->socket_.close(ignored);
    c->io_.restart();
    c->io_.run();
    return false;
  };
  asio::async_connect(c->socket_, *eps, [&](std::error_code e, const asio::ip::tcp::endpoint&) {
    ec = e;
    done = true;
  });
  // (A range connect runs internal handlers per address tried, so only `done` says it finished.)
  if (!wait()) return DeadlineExceededError("data path: connect to " + host + " timed out");
  if (ec) return UnavailableError("data path: connect to " + host + ":" + std::to_string(port) + ": " + ec.message());
  c->socket_.set_option(asio::ip::tcp::no_delay(true), ec);
  if (tls) {
    c->tls_.emplace(c->socket_, *tls);
    VerifyServerName(*c->tls_, security, host);
    done = false;
    c->tls_->async_handshake(asio::ssl::stream_base::client, [&](std::error_code e) {
      ec = e;
      done = true;
    });
    if (!wait()) return DeadlineExceededError("data path: TLS handshake with " + host + " timed out");
    if (ec) return UnavailableError("data path: TLS handshake with " + host + ": " + ec.message());
  }
  return c;
}

DataChannel::~DataChannel() {
  std::error_code ignored;
  socket_.close(ignored);
}

bool DataChannel::Stale() {
  pollfd p{socket_.native_handle(), POLLIN | POLLRDHUP, 0};
  return broken_ || !socket_.is_open() || ::poll(&p, 1, 0) != 0;
}

void DataChannel::Fail(Status s) {
  if (error_.ok()) error_ = std::move(s);
  broken_ = true;
  std::error_code ignored;
  socket_.close(ignored);  // cancels the other direction too
}

void DataChannel::ReadFrame() {
  static_assert(sizeof(ReadAhead) >= wire::kHeaderBytes + 4 + wire::kMaxErrorMessage, "the read-ahead holds a whole ERROR");
  // Frames come out of the read-ahead buffer; a read is started only when it lacks the next one's
  // header and fixed fields (a whole non-UNIT frame, a UNIT's key and result).
  for (;;) {
    const size_t have = rend_ - rpos_;
    if (have < wire::kHeaderBytes) return Fill();
    auto h = wire::ParseHeader(rbuf_.data() + rpos_, /*requests=*/false, 0);
    if (!h.ok()) return Fail(InternalError("data path: bad response: " + h.status().message()));
    const bool unit = h->op == wire::Op::kUnit;
    const size_t fixed = unit ? std::min<size_t>(h->body_length, wire::kKeyBytes + 1) : h->body_length;
    if (have < wire::kHeaderBytes + fixed) return Fill();
    body_.assign(rbuf_.data() + rpos_ + wire::kHeaderBytes, fixed);
    rpos_ += wire::kHeaderBytes + fixed;
    // A UNIT's bytes: what the read-ahead holds of them, then the rest read straight into payload_,
    // with what follows them (the next frames' headers) into the emptied read-ahead in the same
    // system call.
    const size_t n = h->body_length - fixed;
    const size_t buffered = std::min(n, rend_ - rpos_);
    payload_ = std::string(n, '\0');
    std::memcpy(payload_.data(), rbuf_.data() + rpos_, buffered);
    rpos_ += buffered;
    if (buffered < n) {
      rpos_ = rend_ = 0;
      const size_t rest = n - buffered;
      const std::array<asio::mutable_buffer, 2> into{asio::buffer(payload_.data() + buffered, rest), asio::buffer(rbuf_)};
      WithStream([&, hd = *h](auto& s) {
        asio::async_read(s, into, TransferAtLeast(rest), [this, hd, rest](std::error_code ec, size_t got) {
          if (!error_.ok()) return;
          if (ec) return Fail(UnavailableError("data path: read: " + ec.message()));
          rend_ = got - rest;
          if (Deliver(hd)) ReadFrame();
        });
      });
      return;
    }
    if (!Deliver(*h)) return;
  }
}

void DataChannel::Fill() {
  if (rpos_ > 0) {  // (what is left is less than one frame's fixed part)
    std::memmove(rbuf_.data(), rbuf_.data() + rpos_, rend_ - rpos_);
    rend_ -= rpos_;
    rpos_ = 0;
  }
  WithStream([&](auto& s) {
    s.async_read_some(asio::buffer(rbuf_.data() + rend_, rbuf_.size() - rend_), [this](std::error_code ec, size_t n) {
      if (!error_.ok()) return;
      if (ec) return Fail(UnavailableError("data path: read: " + ec.message()));
      rend_ += n;
      ReadFrame();
    });
  });
}

bool DataChannel::Deliver(const wire::Header& h) {
  if (h.op == wire::Op::kError && (h.flags & wire::kFlagFatal)) {
    Fail(wire::ParseError(body_).Prefixed("data path: server closed the connection"));
    return false;
  }
  bool more = true;
  if (Status st = on_frame_(h, body_, &payload_, &more); !st.ok()) {
    Fail(st);
    return false;
  }
  if (more) return true;
  read_done_ = true;
  // The server answers only what was asked: bytes past the last answer break the protocol.
  if (rpos_ != rend_) Fail(InternalError("data path: bytes after the last answer"));
  return false;
}

Status DataChannel::Exchange(const std::vector<asio::const_buffer>& buffers, OnFrame on_frame, Deadline deadline) {
  if (broken_) return UnavailableError("data path: broken connection");
  on_frame_ = std::move(on_frame);
  read_done_ = write_done_ = false;
  error_ = Status::Ok();
  WithStream([&](auto& s) {
    asio::async_write(s, buffers, WholeTransfer, [this](std::error_code ec, size_t) {
      if (!error_.ok()) return;
      if (ec) return Fail(UnavailableError("data path: write: " + ec.message()));
      write_done_ = true;
    });
  });
  ReadFrame();
  io_.restart();
  while (error_.ok() && !(read_done_ && write_done_)) {
    if (io_.run_one_until(deadline) == 0) {
      Fail(DeadlineExceededError("data path: deadline exceeded"));
      break;
    }
  }
  if (!error_.ok()) {
    io_.restart();
    io_.run();  // lets the cancelled operations finish before their buffers go
  }
  on_frame_ = nullptr;
  return error_;
}

Status DataChannel::Put(const wire::NamespaceView& ns, const std::vector<PutUnit>& units, Deadline deadline,
                        std::vector<std::optional<Status>>* answers) {
  answers->assign(units.size(), std::nullopt);
  if (units.empty()) return Status::Ok();
  const uint32_t first = next_id_;
  next_id_ += static_cast<uint32_t>(units.size());
  std::vector<std::string> prefixes;
  prefixes.reserve(units.size());
  std::vector<asio::const_buffer> buffers;
  for (size_t i = 0; i < units.size(); ++i) {
    const PutUnit& u = units[i];
    prefixes.push_back(wire::EncodePutPrefix(first + static_cast<uint32_t>(i), ns, u.key, u.parent, u.bytes.size()));
    buffers.push_back(asio::buffer(prefixes.back()));
    buffers.push_back(asio::buffer(u.bytes.data(), u.bytes.size()));
  }
  size_t next = 0;
  return Exchange(
      buffers,
      [&](const wire::Header& h, std::string_view body, std::string*, bool* more) -> Status {
        if (h.id != first + next || h.op == wire::Op::kUnit) return InternalError("data path: answer out of order");
        (*answers)[next] = h.op == wire::Op::kPutOk ? Status::Ok() : wire::ParseError(body);
        *more = ++next < units.size();
        return Status::Ok();
      },
      deadline);
}

Status DataChannel::Get(const wire::NamespaceView& ns, const std::vector<std::string_view>& keys, Deadline deadline,
                        std::vector<std::optional<std::string>>* units, size_t* answered) {
  // Frames of at most kGetChunk keys, all written at once: the server answers them in order. (Far
  // below any server's key bound: CacheServiceOptions::max_keys_per_request is 65,536.)
  constexpr size_t kGetChunk = 1024;
  units->assign(keys.size(), std::nullopt);
  *answered = 0;
  if (keys.empty()) return Status::Ok();
  const uint32_t first = next_id_;
  std::vector<std::string> frames;
  for (size_t b = 0; b < keys.size(); b += kGetChunk) {
    std::string packed;
    for (size_t i = b; i < std::min(keys.size(), b + kGetChunk); ++i) packed.append(keys[i]);
    frames.push_back(wire::EncodeGet(next_id_++, ns, packed));
  }
  std::vector<asio::const_buffer> buffers;
  for (const std::string& f : frames) buffers.push_back(asio::buffer(f));
  size_t& next = *answered;
  return Exchange(
      buffers,
      [&](const wire::Header& h, std::string_view body, std::string* payload, bool* more) -> Status {
        const uint32_t want_id = first + static_cast<uint32_t>(next / kGetChunk);
        if (h.id != want_id || h.op == wire::Op::kPutOk) return InternalError("data path: answer out of order");
        if (h.op == wire::Op::kError) {  // the whole frame refused: its keys are misses
          next = std::min(keys.size(), (next / kGetChunk + 1) * kGetChunk);
        } else {
          auto u = wire::ParseUnit(body);
          if (!u.ok() || (u->result == wire::UnitResult::kMiss && !payload->empty()))
            return InternalError("data path: malformed UNIT");
          if (u->key != keys[next]) return InternalError("data path: answer for another key");
          if (u->result == wire::UnitResult::kFound) (*units)[next] = std::move(*payload);
          ++next;
        }
        *more = next < keys.size();
        return Status::Ok();
      },
      deadline);
}

}  // namespace ds41
