#include "cache_service/data_session.h"

#include <algorithm>

#include "unit/unit_key.h"

namespace ds41::data_internal {
namespace {

constexpr size_t kBodyChunk = 1 << 20;    // a body is read (and its buffer grown) this much at a time
constexpr size_t kKeysPerTask = 1;        // GET keys per store task: a GET's reads all run at once
constexpr size_t kMaxWriteBytes = 8 << 20;  // responses coalesced into one write

bool CleanEof(const std::error_code& ec) {
  return ec == asio::error::eof || ec == asio::error::connection_reset || ec == asio::ssl::error::stream_truncated;
}

}  // namespace

DataSession::DataSession(asio::ip::tcp::socket socket, std::shared_ptr<DataShared> shared)
    : socket_(std::move(socket)),
      read_timer_(socket_.get_executor()),
      write_timer_(socket_.get_executor()),
      budget_timer_(socket_.get_executor()),
      shared_(std::move(shared)) {
  if (shared_->tls) tls_.emplace(socket_, *shared_->tls);
}

template <typename F>
void DataSession::WithStream(F&& f) {
  ds41::WithStream(tls_, socket_, std::forward<F>(f));
}

void DataSession::Start() {
  shared_->open_sessions.fetch_add(1, std::memory_order_relaxed);
  shared_->metrics->connections_accepted.Increment();
  shared_->metrics->connections_open.Increment();
  asio::post(socket_.get_executor(), [self = shared_from_this()] { self->Begin(); });
}

void DataSession::Begin() {
  std::error_code ignored;
  socket_.set_option(asio::ip::tcp::no_delay(true), ignored);
  if (!tls_) {
    Pump();
    return;
  }
  read_stopped_ = true;  // no frames, and no error frame, before the handshake: a timeout just closes
  ArmRead(shared_->options.io_timeout);
  tls_->async_handshake(asio::ssl::stream_base::server, [self = shared_from_this()](std::error_code ec) {
    self->CancelRead();
    if (self->closed_) return;
    self->read_stopped_ = false;
    if (ec) {
      self->shared_->metrics->error_tls.Increment();
      self->CloseOnStrand();
      return;
    }
    self->Pump();
  });
}

void DataSession::Close() {
  asio::post(socket_.get_executor(), [self = shared_from_this()] { self->CloseOnStrand(); });
}

void DataSession::CloseOnStrand() {
  if (closed_) return;
  closed_ = true;
  CancelRead();
  CancelWrite();
  budget_timer_.cancel();
  budget_waiters_.clear();
  Hold(-held_);  // what slots still in flight hold goes with them
  std::error_code ignored;
  socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
  shared_->open_sessions.fetch_sub(1, std::memory_order_relaxed);  // (before the gauge: what tests poll)
  shared_->metrics->connections_open.Decrement();
}

void DataSession::CancelRead() {
  ++read_gen_;
  read_timer_.cancel();
}

void DataSession::CancelWrite() {
  ++write_gen_;
  write_timer_.cancel();
}

void DataSession::Hold(int64_t n) {
  held_ += n;
  if (n >= 0) {
    shared_->metrics->held_bytes.Increment(static_cast<double>(n));
  } else {
    shared_->metrics->held_bytes.Decrement(static_cast<double>(-n));
  }
}

void DataSession::AfterBudget(std::function<void()> then) {
  budget_waiters_.push_back(std::move(then));
  if (budget_waiters_.size() == 1) ArmBudget();
}

void DataSession::ArmBudget() {
  // Other sessions free the budget without knowing who waits: look again shortly.
  budget_timer_.expires_after(std::chrono::milliseconds(2));
  budget_timer_.async_wait([self = shared_from_this()](std::error_code ec) {
    if (ec || self->closed_) return;
    if (self->shared_->OverBudget()) {
      self->ArmBudget();
      return;
    }
    auto waiters = std::move(self->budget_waiters_);
    self->budget_waiters_.clear();
    for (auto& f : waiters) f();
  });
}

void DataSession::ArmRead(std::chrono::milliseconds d) {
  const uint64_t gen = ++read_gen_;
  read_timer_.expires_after(d);
  read_timer_.async_wait([self = shared_from_this(), gen](std::error_code ec) {
    if (ec || self->closed_ || gen != self->read_gen_) return;
    if (self->read_stopped_) {
      self->CloseOnStrand();
      return;
    }
    // Tell the peer why while its side still reads; one that does not is closed by the write timeout.
    self->Fatal(self->shared_->metrics->error_timeout, DeadlineExceededError("data path: connection idle or stalled"),
                self->in_body_ ? self->header_.id : 0);
  });
}

void DataSession::ReadHeader() {
  reading_ = true;
  in_body_ = false;
  if (head_got_ == head_.size()) {  // read along with the previous frame's body
    head_got_ = 0;
    OnHeader({}, 0, /*between_frames=*/false);
    return;
  }
  ArmRead(shared_->options.idle_timeout);
  WithStream([&](auto& s) {
    asio::async_read(s, asio::buffer(head_.data() + head_got_, head_.size() - head_got_),
                     [self = shared_from_this()](std::error_code ec, size_t n) {
                       const bool between_frames = self->head_got_ == 0 && n == 0;
                       self->head_got_ = 0;
                       self->OnHeader(ec, n, between_frames);
                     });
  });
}

void DataSession::OnHeader(std::error_code ec, size_t n, bool between_frames) {
  reading_ = false;
  if (closed_ || read_stopped_) return;
  shared_->metrics->bytes_in.Increment(static_cast<double>(n));
  if (ec) {
    if (between_frames && CleanEof(ec)) {  // answer what was asked, then close
      read_stopped_ = peer_done_ = true;
      CancelRead();
      Pump();
      return;
    }
    shared_->metrics->error_io.Increment();  // gone mid-frame
    CloseOnStrand();
    return;
  }
  auto h = wire::ParseHeader(head_, /*requests=*/true, shared_->checks->max_keys_per_request());
  if (!h.ok()) {
    Fatal(shared_->metrics->error_framing, h.status(), 0);  // (no id: the header did not parse)
    return;
  }
  header_ = *h;
  body_.Clear();
  body_got_ = 0;
  in_body_ = true;
  ArmRead(shared_->options.io_timeout);
  ReadBody();
}

void DataSession::ReadBody() {
  if (body_got_ == header_.body_length) {
    CancelRead();
    in_body_ = false;
    OnFrame();
    return;
  }
  if (shared_->OverBudget()) {
    reading_ = true;  // (still inside the frame: Pump must not start a header read meanwhile)
    AfterBudget([this] { ReadBodyChunk(); });
  } else {
    ReadBodyChunk();
  }
}

void DataSession::ReadBodyChunk() {
  // Grown as bytes arrive: a header that lies about its length costs nothing until they do.
  const size_t chunk = std::min<size_t>(header_.body_length - body_got_, kBodyChunk);
  body_.Resize(body_got_ + chunk);
  Hold(static_cast<int64_t>(chunk));
  body_held_ += static_cast<int64_t>(chunk);
  ReadBodyBytes();
}

void DataSession::ReadBodyBytes() {
  // The body's last bytes are read together with whatever of the next frame's header has arrived
  // (one read per frame instead of two where the peer sends ahead of this session).
  reading_ = true;
  auto done = [self = shared_from_this()](std::error_code ec, size_t n) {
    self->reading_ = false;
    if (self->closed_ || self->read_stopped_) return;
    self->shared_->metrics->bytes_in.Increment(static_cast<double>(n));
    if (ec) {
      self->shared_->metrics->error_io.Increment();
      self->CloseOnStrand();
      return;
    }
    const size_t to_body = std::min(n, self->body_.size() - self->body_got_);
    self->body_got_ += to_body;
    self->head_got_ = n - to_body;
    if (self->body_got_ < self->body_.size()) return self->ReadBodyBytes();
    self->ReadBody();
  };
  const asio::mutable_buffer rest = asio::buffer(body_.data() + body_got_, body_.size() - body_got_);
  WithStream([&](auto& s) {
    if (body_.size() == header_.body_length) {
      s.async_read_some(std::array<asio::mutable_buffer, 2>{rest, asio::buffer(head_)}, std::move(done));
    } else {
      s.async_read_some(rest, std::move(done));
    }
  });
}

void DataSession::OnFrame() {
  if (header_.op == wire::Op::kPut) {
    DispatchPut();
  } else {
    DispatchGet();
  }
  // A PUT's body went to its slot; anything else read (a GET's keys, a refused frame) is done with.
  Hold(-body_held_);
  body_held_ = 0;
  Pump();
}

void DataSession::DispatchPut() {
  // Only the framing is checked here (a framing error ends the connection, so it must be found
  // before the next frame is read); the unit's own checks (its checksum, a pass over its bytes) run
  // with the store call, off this connection's strand.
  if (auto v = wire::ParsePut(body_.view()); !v.ok()) {
    Fatal(shared_->metrics->error_framing, v.status(), header_.id);
    return;
  }
  Slot s;
  s.job = PutJob{header_.id, std::move(body_)};
  s.put = true;
  s.held = body_held_;
  body_held_ = 0;
  slots_.push_back(std::move(s));
}

void DataSession::DispatchGet() {
  auto v = wire::ParseGet(body_.view(), shared_->checks->max_keys_per_request());
  if (!v.ok()) {
    Fatal(shared_->metrics->error_framing, v.status(), header_.id);
    return;
  }
  const uint32_t id = header_.id;
  Key32 ns;
  if (Status st = shared_->checks->CheckNamespace({v->ns.id, v->ns.model_fingerprint, v->ns.format_version}, &ns); !st.ok()) {
    shared_->metrics->get_rejected.Increment();
    Answer({wire::EncodeError(id, st, false)}, false);
    return;
  }
  shared_->metrics->get_ok.Increment();
  for (size_t i = 0; i < v->count(); i += kKeysPerTask) {
    std::vector<Key32> keys(std::min(kKeysPerTask, v->count() - i));
    for (size_t j = 0; j < keys.size(); ++j) ToKey(v->key(i + j), &keys[j]);
    Slot s;
    s.work = [store = shared_->store, ns, keys = std::move(keys), id]() -> std::vector<std::string> {
      std::vector<std::string> parts;
      for (const Key32& k : keys) {
        const std::string_view key = KeyView(k);
        auto r = store->Get(ns, k);  // verified: a corrupt unit is deleted, counted, and a miss
        if (!r.ok()) {
          const std::string msg = r.status().ToString().substr(0, wire::kMaxErrorMessage);
          parts.push_back(wire::EncodeUnitPrefix(id, key, wire::UnitResult::kReadFailed, msg.size()) + msg);
        } else if (!r->has_value()) {
          parts.push_back(wire::EncodeUnitPrefix(id, key, wire::UnitResult::kMiss, 0));
        } else {
          parts.push_back(wire::EncodeUnitPrefix(id, key, wire::UnitResult::kFound, (*r)->size()));
          parts.push_back(std::move(**r));
        }
      }
      return parts;
    };
    slots_.push_back(std::move(s));
  }
}

void DataSession::Answer(std::vector<std::string> parts, bool fatal) {
  Slot s;
  s.parts = std::move(parts);
  s.done = true;
  s.fatal = fatal;
  slots_.push_back(std::move(s));
}

void DataSession::Fatal(prometheus::Counter& reason, const Status& status, uint32_t id) {
  if (read_stopped_) return;
  reason.Increment();
  read_stopped_ = true;
  Answer({wire::EncodeError(id, status, true)}, true);
  Pump();
}

void DataSession::Pump() {
  if (closed_) return;
  const int window = std::max(1, shared_->options.window);
  while (active_ < window && next_start_ < first_seq_ + slots_.size()) {
    Slot& s = slots_[next_start_ - first_seq_];
    // A GET waits for this connection's earlier PUTs (their completion pumps again) and for room in
    // the budget for its answer.
    if (!s.done && !s.put && puts_running_ > 0) break;
    if (!s.done && !s.put && shared_->OverBudget()) {
      AfterBudget([this] { Pump(); });
      break;
    }
    if (!s.done && s.put) {
      // At most kPutCallsPerStream store calls of this connection's PUTs at once: the PUTs read
      // meanwhile queue up and go together in the next one (one segment write, one index write).
      if (put_groups_running_ >= kPutCallsPerStream) break;
      StartPutGroup(window);
      continue;
    }
    ++active_;
    if (!s.done) {
      shared_->io->Schedule([self = shared_from_this(), seq = next_start_, work = std::move(s.work)] {
        std::vector<std::string> parts = work();
        asio::post(self->socket_.get_executor(),
                   [self, seq, parts = std::move(parts)]() mutable { self->OnWorkDone(seq, std::move(parts)); });
      });
    }
    ++next_start_;
  }
  if (!writing_ && !slots_.empty() && slots_.front().done && first_seq_ < next_start_) {
    wparts_.clear();
    wbufs_.clear();
    size_t bytes = 0;
    bool fatal = false;
    while (!slots_.empty() && slots_.front().done && first_seq_ < next_start_ && bytes < kMaxWriteBytes && !fatal) {
      for (std::string& p : slots_.front().parts) {
        bytes += p.size();
        wparts_.push_back(std::move(p));
      }
      fatal = slots_.front().fatal;
      write_held_ += slots_.front().held;
      slots_.pop_front();
      ++first_seq_;
      --active_;
    }
    for (const std::string& p : wparts_) wbufs_.push_back(asio::buffer(p));
    writing_ = true;
    const uint64_t gen = ++write_gen_;
    write_timer_.expires_after(shared_->options.io_timeout);
    write_timer_.async_wait([self = shared_from_this(), gen](std::error_code ec) {
      if (ec || self->closed_ || gen != self->write_gen_) return;
      self->shared_->metrics->error_timeout.Increment();
      self->CloseOnStrand();
    });
    WithStream([&](auto& s) {
      asio::async_write(s, wbufs_, [self = shared_from_this(), fatal](std::error_code ec, size_t n) { self->OnWrite(ec, n, fatal); });
    });
  }
  // Reading goes on while every slot has started, or while the next one is a PUT waiting for the
  // running store calls (so that the next call takes all PUTs read meanwhile), up to the window.
  const bool all_started = next_start_ == first_seq_ + slots_.size();
  const bool puts_queue = !all_started && slots_[next_start_ - first_seq_].put && !slots_[next_start_ - first_seq_].done;
  if (!reading_ && !read_stopped_ && (all_started || puts_queue) && slots_.size() < static_cast<size_t>(window))
    ReadHeader();
  if (peer_done_ && slots_.empty() && !writing_) CloseOnStrand();
}

void DataSession::StartPutGroup(int window) {
  std::vector<std::pair<uint64_t, PutJob>> group;
  while (active_ < window && next_start_ < first_seq_ + slots_.size()) {
    Slot& s = slots_[next_start_ - first_seq_];
    if (s.done || !s.put) break;
    group.emplace_back(next_start_, std::move(*s.job));
    s.job.reset();
    ++active_;
    ++puts_running_;
    ++next_start_;
  }
  ++put_groups_running_;
  shared_->io->Schedule([self = shared_from_this(), group = std::move(group)] {
    const DataShared& sh = *self->shared_;
    std::vector<std::optional<Status>> refused(group.size());  // set: answered without the store
    std::vector<CheckedPut> checked;
    checked.reserve(group.size());  // (items point into it)
    std::vector<UnitStore::PutItem> items;
    for (size_t i = 0; i < group.size(); ++i) {
      const auto v = wire::ParsePut(group[i].second.body.view());  // (parsed on the strand already)
      auto put = sh.checks->CheckPut({v->ns.id, v->ns.model_fingerprint, v->ns.format_version}, v->key, v->parent, v->unit);
      if (!put.ok()) {
        sh.metrics->put_rejected.Increment();
        refused[i] = put.status();
        continue;
      }
      checked.push_back(*put);
      items.push_back(checked.back().Item(v->unit));
    }
    const std::vector<Status> st = items.empty() ? std::vector<Status>{} : sh.store->PutMany(items);
    std::vector<std::pair<uint64_t, std::vector<std::string>>> answers;
    for (size_t i = 0, stored = 0; i < group.size(); ++i) {
      const uint32_t id = group[i].second.id;
      if (refused[i]) {
        answers.push_back({group[i].first, {wire::EncodeError(id, *refused[i], false)}});
        continue;
      }
      const Status& r = st[stored++];
      (r.ok() ? sh.metrics->put_ok : sh.metrics->put_failed).Increment();
      answers.push_back({group[i].first, {r.ok() ? wire::EncodePutOk(id) : wire::EncodeError(id, r, false)}});
    }
    asio::post(self->socket_.get_executor(), [self, answers = std::move(answers)]() mutable {
      --self->put_groups_running_;
      for (auto& [seq, parts] : answers) self->OnWorkDone(seq, std::move(parts));
    });
  });
}

void DataSession::OnWorkDone(uint64_t seq, std::vector<std::string> parts) {
  if (closed_) return;
  Slot& s = slots_[seq - first_seq_];
  s.parts = std::move(parts);
  s.done = true;
  if (s.put) {  // its body is freed
    --puts_running_;
    Hold(-s.held);
    s.held = 0;
  } else {  // its answer is held until written
    for (const std::string& p : s.parts) s.held += static_cast<int64_t>(p.size());
    Hold(s.held);
  }
  Pump();
}

void DataSession::OnWrite(std::error_code ec, size_t n, bool fatal) {
  writing_ = false;
  CancelWrite();
  Hold(-write_held_);
  write_held_ = 0;
  if (closed_) return;
  shared_->metrics->bytes_out.Increment(static_cast<double>(n));
  if (ec) {
    if (!CleanEof(ec)) shared_->metrics->error_io.Increment();
    CloseOnStrand();
    return;
  }
  if (fatal) {
    CloseOnStrand();
    return;
  }
  if (reading_ && !in_body_) ArmRead(shared_->options.idle_timeout);  // the peer is busy reading: not idle
  Pump();
}

}  // namespace ds41::data_internal
