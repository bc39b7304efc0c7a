#include "cache_service/data_session.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "unit/unit_key.h"

namespace ds41::data_internal {
namespace {

// Read chunks: between frames a connection reads into a small one; once a read fills it, into full
// ones (kChunkBytes, from DataShared::chunks; 4 MiB chunks stored 4- and 16-client put streams 12-30%
// faster than 2 MiB ones in alternating runs). A frame larger than a chunk gets one of its own, grown
// as its bytes arrive (by at least kGrowStep, at most doubling), so a header that lies about its
// length costs little until they do.
constexpr size_t kSmallChunk = 64 << 10;
constexpr size_t kGrowStep = 1 << 20;
// A read into less free room than this (where the frame being read wants more) moves to a new chunk.
constexpr size_t kMinRead = 16 << 10;
// GET keys per store task: the store reads a task's units that lie together in one device read
// (a chain's, put together), and a GET's tasks run at once. Over loopback on 2 vCPUs (1, 4 and 16
// clients, two runs each), 4 was faster than 1 in 5 of 6 and than 2 in 4 of 6, at 6-17% less server
// CPU than 1; 8 and 16 were no faster (a task's first unit is answered only once all are read).
constexpr size_t kKeysPerTask = 4;
constexpr size_t kMaxWriteBytes = 8 << 20;  // responses coalesced into one write

bool CleanEof(const std::error_code& ec) {
  return ec == asio::error::eof || ec == asio::error::connection_reset || ec == asio::ssl::error::stream_truncated;
}

}  // namespace

struct DataSession::Chunk {
  // Counted against the budget unless `counted` is false (a connection's small chunk).
  Chunk(size_t bytes, DataShared* shared_in, bool counted) : capacity(bytes), shared(shared_in) {
    if (bytes == shared->chunks->block_bytes()) {
      pooled = shared->chunks->Take();
      data = reinterpret_cast<char*>(pooled.get());
      shared->PublishChunkPool();
    } else {
      heap = std::make_unique_for_overwrite<char[]>(bytes);
      data = heap.get();
    }
    if (!counted) return;
    counting = true;
    shared->chunk_bytes.fetch_add(static_cast<int64_t>(capacity), std::memory_order_relaxed);
    shared->metrics->held_bytes.Increment(static_cast<double>(capacity));
  }
  ~Chunk() {
    Uncount();
    if (pooled == nullptr) return;
    shared->chunks->Give(std::move(pooled));
    shared->PublishChunkPool();
  }
  // Out of the budget from now on (its memory may outlive the count by a pending read's handler).
  void Uncount() {
    if (!counting) return;
    shared->metrics->held_bytes.Decrement(static_cast<double>(capacity));
    shared->chunk_bytes.fetch_sub(static_cast<int64_t>(capacity), std::memory_order_relaxed);
    counting = false;
  }
  Chunk(const Chunk&) = delete;
  Chunk& operator=(const Chunk&) = delete;

  char* data = nullptr;  // in `pooled` or `heap`
  size_t capacity;
  DataShared* shared;  // (outlives the server's pool, where the last holder may let go)
  bool counting = false;
  IoBuffer pooled;
  std::unique_ptr<char[]> heap;
};

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
  if (InOnlyHere()) in_->Uncount();  // (a chunk store calls still read stays counted until they end)
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
    if (self->shared_->AnswersOverBudget()) {  // (a waiter for room looks again, and may wait again)
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
                self->partial_ ? self->partial_->id : 0);
  });
}

void DataSession::ReadFrames() {
  if (ParseFrames()) {
    Pump();
    return;
  }
  StartRead();
}

bool DataSession::ParseFrames() {
  const size_t window = static_cast<size_t>(std::max(1, shared_->options.window));
  bool any = false;
  while (!read_stopped_ && slots_.size() < window) {
    const size_t have = in_end_ - in_begin_;
    if (!partial_) {
      if (have < wire::kHeaderBytes) break;
      auto h = wire::ParseHeader(in_->data + in_begin_, /*requests=*/true, shared_->checks->max_keys_per_request());
      if (!h.ok()) {
        Fatal(shared_->metrics->error_framing, h.status(), 0);  // (no id: the header did not parse)
        return true;
      }
      partial_ = *h;
    }
    const size_t total = wire::kHeaderBytes + partial_->body_length;
    if (have < total) break;
    const wire::Header h = *partial_;
    partial_.reset();
    frame_deadline_.reset();
    const std::string_view body(in_->data + in_begin_ + wire::kHeaderBytes, h.body_length);
    in_begin_ += total;
    if (h.op == wire::Op::kPut) {
      DispatchPut(h, body);
    } else {
      DispatchGet(h, body);
    }
    any = true;
  }
  return any;
}

bool DataSession::InOnlyHere() const {
  if (in_ == nullptr || in_.use_count() != 1) return false;
  // The store calls that held it are done reading it: their releases (acq_rel decrements of the
  // count read above) happen before what this session writes into it next.
  std::atomic_thread_fence(std::memory_order_acquire);
  return true;
}

bool DataSession::MakeRoom() {
  const size_t have = in_end_ - in_begin_;
  // What in_ must hold from in_begin_ on: the frame being read (once its header is in), else a header.
  size_t want = wire::kHeaderBytes;
  if (partial_) {
    const size_t total = wire::kHeaderBytes + partial_->body_length;
    want = total <= kChunkBytes ? total : std::min(total, std::max(have + kGrowStep, 2 * have));
  }
  bool unique = InOnlyHere();
  if (have == 0 && in_ != nullptr && in_->capacity > kSmallChunk) {
    // Between frames, the next read waits in a small chunk: a pooled connection between requests
    // would otherwise pin a full chunk for as long as it stays open (its store calls keep this one
    // until they end). Clients' pools grow to their peak concurrency, so the cache held 4 MiB per
    // connection they ever opened (docs/benchmarks-history.md, "Tenth soak").
    in_.reset();
    unique = false;
  }
  if (have == 0 && unique) in_begin_ = in_end_ = 0;
  // Room for a useful read: up to kMinRead, and never none (a read into no room returns at once).
  const size_t room = std::max<size_t>(1, std::min(kMinRead, want > have ? want - have : 0));
  auto fits = [&] { return in_ != nullptr && in_->capacity - in_begin_ >= want && in_->capacity - in_end_ >= room; };
  if (fits()) return true;
  const size_t capacity = std::max({want, have + room, in_ == nullptr ? kSmallChunk : kChunkBytes});
  // A small chunk is outside the budget, as a header buffer would be: a connection has at most one
  // such (small_; another, while store calls still hold that one, counts), and an idle one must be
  // able to read its next request. A chunk only this session holds goes as its successor comes, so
  // it does not count against it (else a frame larger than a chunk could wait forever on the chunk
  // holding its start).
  const bool counted = capacity > kSmallChunk || !small_.expired();
  const int64_t replaced = unique && in_->counting ? static_cast<int64_t>(in_->capacity) : 0;
  const bool may_allocate = !counted || !shared_->OverBudget(replaced);
  if (unique && (in_->capacity >= capacity || (!may_allocate && in_->capacity >= std::max(want, have + room)))) {
    std::memmove(in_->data, in_->data + in_begin_, have);
    in_begin_ = 0;
    in_end_ = have;
    return true;
  }
  if (!may_allocate) return false;
  auto grown = std::make_shared<Chunk>(capacity, shared_.get(), counted);
  if (!counted) small_ = grown;
  if (have > 0) std::memcpy(grown->data, in_->data + in_begin_, have);
  in_ = std::move(grown);
  in_begin_ = 0;
  in_end_ = have;
  return true;
}

void DataSession::StartRead() {
  if (!MakeRoom()) {
    // Our store calls letting go of in_ pump again; the budget's waiter covers other sessions'.
    if (!room_waiting_) {
      room_waiting_ = true;
      CancelRead();
      AfterBudget([this] {
        room_waiting_ = false;
        Pump();
      });
    }
    return;
  }
  reading_ = true;
  if (in_end_ == in_begin_) {
    ArmRead(shared_->options.idle_timeout);
  } else {  // inside a frame: the rest of it is due by its deadline, however it trickles in
    const auto now = std::chrono::steady_clock::now();
    if (!frame_deadline_) frame_deadline_ = now + shared_->options.io_timeout;
    ArmRead(std::max(std::chrono::milliseconds(0), std::chrono::duration_cast<std::chrono::milliseconds>(*frame_deadline_ - now)));
  }
  WithStream([&](auto& s) {
    s.async_read_some(asio::buffer(in_->data + in_end_, in_->capacity - in_end_),
                      [self = shared_from_this()](std::error_code ec, size_t n) { self->OnRead(ec, n); });
  });
}

void DataSession::OnRead(std::error_code ec, size_t n) {
  reading_ = false;
  ++read_gen_;  // (the timer is re-armed by the next read; a stale expiry does nothing)
  if (closed_ || read_stopped_) return;
  shared_->metrics->bytes_in.Increment(static_cast<double>(n));
  in_end_ += n;
  if (ec) {
    if (in_end_ == in_begin_ && CleanEof(ec)) {  // between frames: answer what was asked, then close
      read_stopped_ = peer_done_ = true;
      CancelRead();
      Pump();
      return;
    }
    shared_->metrics->error_io.Increment();  // gone mid-frame
    CloseOnStrand();
    return;
  }
  Pump();
}

void DataSession::DispatchPut(const wire::Header& h, std::string_view body) {
  // Only the framing is checked here (a framing error ends the connection, so it must be found
  // before the next frame is read); the unit's own checks (its checksum, a pass over its bytes) run
  // with the store call, off this connection's strand.
  if (auto v = wire::ParsePut(body); !v.ok()) {
    Fatal(shared_->metrics->error_framing, v.status(), h.id);
    return;
  }
  Slot s;
  s.job = PutJob{h.id, in_, body};
  s.put = true;
  slots_.push_back(std::move(s));
}

void DataSession::DispatchGet(const wire::Header& h, std::string_view body) {
  auto v = wire::ParseGet(body, shared_->checks->max_keys_per_request());
  if (!v.ok()) {
    Fatal(shared_->metrics->error_framing, v.status(), h.id);
    return;
  }
  const uint32_t id = h.id;
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
      std::vector<StatusOr<std::optional<std::string>>> got = store->GetMany(ns, keys);  // (verified: a corrupt unit is a miss)
      for (size_t j = 0; j < keys.size(); ++j) {
        const std::string_view key = KeyView(keys[j]);
        auto& r = got[j];
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
    if (!s.done && !s.put && shared_->AnswersOverBudget()) {
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
      shared_->store_ops->Schedule([self = shared_from_this(), seq = next_start_, work = std::move(s.work)] {
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
      asio::async_write(s, wbufs_, WholeTransfer,
                        [self = shared_from_this(), fatal](std::error_code ec, size_t n) { self->OnWrite(ec, n, fatal); });
    });
  }
  // Reading goes on while every slot has started, or while the next one is a PUT waiting for the
  // running store calls (so that the next call takes all PUTs read meanwhile), up to the window.
  const bool all_started = next_start_ == first_seq_ + slots_.size();
  const bool puts_queue = !all_started && slots_[next_start_ - first_seq_].put && !slots_[next_start_ - first_seq_].done;
  if (!reading_ && !read_stopped_ && (all_started || puts_queue) && slots_.size() < static_cast<size_t>(window))
    ReadFrames();
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
  shared_->store_ops->Schedule([self = shared_from_this(), group = std::move(group)]() mutable {
    const DataShared& sh = *self->shared_;
    std::vector<std::optional<Status>> refused(group.size());  // set: answered without the store
    std::vector<CheckedPut> checked;
    checked.reserve(group.size());  // (items point into it)
    std::vector<UnitStore::PutItem> items;
    for (size_t i = 0; i < group.size(); ++i) {
      const auto v = wire::ParsePut(group[i].second.body);  // (parsed on the strand already)
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
    // The chunks go before the answers are posted: the session reuses a chunk only it holds.
    items.clear();
    group.clear();
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
  if (s.put) {
    --puts_running_;
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
  if (reading_ && in_end_ == in_begin_) ArmRead(shared_->options.idle_timeout);  // the peer is busy reading: not idle
  Pump();
}

}  // namespace ds41::data_internal
