#include "cache_client/cache_client.h"

#include <grpcpp/alarm.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <future>
#include <optional>

#include "cache.grpc.pb.h"
#include "cache_client/ack_log.h"
#include "cache_client/shard_data_path.h"
#include "rpc/channels.h"
#include "rpc/status_map.h"
#include "rpc/transport_security.h"
#include "util/mutex.h"
#include "util/sha256.h"
#include "util/split_list.h"

namespace ds41 {
namespace {

namespace pb = ds41::cache::v1;

uint64_t Mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The host part of a gRPC target ("host:port", "[v6]:port", "dns:///host:port").
std::string HostOf(std::string address) {
  if (const size_t scheme = address.find(":///"); scheme != std::string::npos) address = address.substr(scheme + 4);
  address = address.substr(0, address.rfind(':'));
  if (address.size() >= 2 && address.front() == '[' && address.back() == ']') address = address.substr(1, address.size() - 2);
  return address;
}

// gRPC takes system_clock deadlines; a call's deadline is a steady_clock one.
std::chrono::system_clock::time_point SystemDeadline(std::chrono::steady_clock::time_point deadline) {
  return std::chrono::system_clock::now() +
         std::chrono::duration_cast<std::chrono::system_clock::duration>(deadline - std::chrono::steady_clock::now());
}

bool Retryable(const grpc::Status& s) {
  return s.error_code() == grpc::StatusCode::UNAVAILABLE || s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
}

}  // namespace

struct CacheClient::Shard {
  std::string name;
  uint64_t seed = 0;
  std::unique_ptr<pb::Cache::Stub> stub;
  std::unique_ptr<ShardDataPath> data;  // null: gRPC only
  std::atomic<int> calls{0};            // parts of Puts and Gets in flight to it
};

namespace {

// Fewest units per stripe: below it the second connection's round trips cost more than it adds.
constexpr size_t kStripeUnits = 32;

// `idx` cut into `n` contiguous parts of near-equal size.
std::vector<std::vector<size_t>> Split(const std::vector<size_t>& idx, int n) {
  std::vector<std::vector<size_t>> parts(static_cast<size_t>(n));
  for (size_t p = 0, from = 0; p < parts.size(); ++p) {
    const size_t to = idx.size() * (p + 1) / parts.size();
    parts[p].assign(idx.begin() + static_cast<std::ptrdiff_t>(from), idx.begin() + static_cast<std::ptrdiff_t>(to));
    from = to;
  }
  return parts;
}

// Counts a part in flight to a shard for as long as it lives.
class InFlight {
 public:
  explicit InFlight(std::atomic<int>& n) : n_(n) { n_.fetch_add(1, std::memory_order_relaxed); }
  ~InFlight() { n_.fetch_sub(1, std::memory_order_relaxed); }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;

 private:
  std::atomic<int>& n_;
};

}  // namespace

int CacheClient::StripesFor(const Shard& shard, size_t units) const {
  // Only a shard nobody else is using gets more connections: where calls already overlap, they
  // keep its network threads busy, and more connections would only add their own overhead.
  if (shard.data == nullptr || shard.calls.load(std::memory_order_relaxed) > 0) return 1;
  if (opt_.io == nullptr || opt_.io->threads() < 2) return 1;  // stripes would run one after another
  return static_cast<int>(std::clamp<size_t>(units / kStripeUnits, 1, static_cast<size_t>(std::max(1, opt_.max_stripes))));
}

CacheNamespace CacheNamespace::Make(const std::string& fp_hex, const std::string& salt) {
  CacheNamespace ns;
  ns.model_fingerprint = fp_hex;
  auto fp = ParseFingerprint(fp_hex);
  ns.id = NamespaceRoot(fp.ok() ? *fp : Fingerprint{}, kUnitFormatVersion, salt);
  return ns;
}

StatusOr<std::unique_ptr<CacheClient>> CacheClient::Create(const CacheClientOptions& o) {
  if (o.shards.empty()) return InvalidArgumentError("cache client: no shards");
  std::unique_ptr<CacheClient> c(new CacheClient());
  c->opt_ = o;
  const TransportSecurity security = ProcessTransportSecurity();
  std::shared_ptr<asio::ssl::context> tls;
  if (o.data_path && security.tls()) {
    auto ctx = MakeClientTlsContext(security);
    if (!ctx.ok()) return ctx.status();
    tls = *ctx;
  }
  for (const std::string& a : o.shards) {
    auto s = std::make_unique<Shard>();
    s->name = a;
    Sha256 h;
    h.Update(a);
    auto d = h.Digest();
    std::memcpy(&s->seed, d.data(), 8);
    s->stub = pb::Cache::NewStub(MakeChannel(a, 64 << 20));
    if (o.data_path) {
      // The control plane says where the shard's data path is (Stats), so a shard is one address.
      auto probe = [stub = s->stub.get()](DataChannel::Deadline deadline) -> StatusOr<DataEndpoint> {
        grpc::ClientContext ctx;
        ctx.set_deadline(SystemDeadline(deadline));
        pb::StatsResponse st;
        if (const grpc::Status g = stub->Stats(&ctx, pb::StatsRequest(), &st); !g.ok()) return FromGrpc(g);
        return DataEndpoint{static_cast<int>(st.data_port()), st.data_wire_version(), st.data_tls()};
      };
      s->data = std::make_unique<ShardDataPath>(HostOf(a), std::move(probe), tls, security);
    }
    c->shards_.push_back(std::move(s));
  }
  if (!o.ack_log.empty()) {
    auto log = AckLog::Open(o.ack_log);
    if (!log.ok()) return log.status();
    c->ack_log_ = std::move(*log);
  }
  return c;
}

CacheClient::~CacheClient() = default;

void CacheClient::ForEachPart(size_t n, const std::function<void(size_t)>& fn) const {
  if (opt_.io == nullptr) {
    for (size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  // Every part runs to its end before this returns, whatever another throws (the parts write into
  // the caller's frame); the first exception then reaches the caller, never a pool thread's loop.
  std::exception_ptr first;
  Mutex mu;
  opt_.io->ParallelFor(static_cast<int64_t>(n), [&](int64_t i) {
    try {
      fn(static_cast<size_t>(i));
    } catch (...) {
      MutexLock l(&mu);
      if (!first) first = std::current_exception();
    }
  });
  if (first) std::rethrow_exception(first);
}

int CacheClient::shards() const { return static_cast<int>(shards_.size()); }

int CacheClient::OwnerOf(const UnitKey& k) const {
  uint64_t key64;
  std::memcpy(&key64, k.data(), 8);  // keys are SHA-256 outputs: already uniform
  int best = 0;
  uint64_t best_score = 0;
  for (size_t i = 0; i < shards_.size(); ++i) {
    const uint64_t score = Mix(key64 ^ shards_[i]->seed);
    if (i == 0 || score > best_score) {
      best = static_cast<int>(i);
      best_score = score;
    }
  }
  return best;
}

namespace {
void FillNs(const CacheNamespace& ns, pb::Namespace* out) {
  out->set_id(KeyString(ns.id));
  out->set_model_fingerprint(ns.model_fingerprint);
  out->set_format_version(ns.format_version);
}

wire::NamespaceView WireNs(const CacheNamespace& ns) { return {KeyView(ns.id), ns.model_fingerprint, ns.format_version}; }

// A PUT frame carries at most kMaxUnitBytes unit bytes (cache_data/wire.h); a larger one is a
// protocol error that closes the connection, so such a unit goes over gRPC, which refuses it as
// the service does (INVALID_ARGUMENT).
bool FitsDataPath(const UnitPut& u) { return u.bytes.size() <= kMaxUnitBytes; }
}  // namespace

CacheClient::Deadline CacheClient::CallDeadline(size_t units) const {
  return std::chrono::steady_clock::now() + opt_.deadline * static_cast<int64_t>(1 + units / 64);
}

// One lookup: its chain, what each shard is asked, and what the answers say so far. The shards'
// calls write disjoint elements (a key is owned by one shard); the last call to end merges.
struct CacheClient::Lookup {
  CacheNamespace ns;
  std::vector<int32_t> tokens;
  int unit_tokens = 0;
  std::vector<UnitKey> chain;
  std::vector<std::vector<int>> owned;  // per shard: the keys it owns, in chain order; -1 is the root
  std::vector<char> present;
  std::vector<std::vector<std::pair<UnitKey, uint32_t>>> tails;  // [i + 1]: after chain[i]; [0]: the root
  std::atomic<int> pending{0}, down{0};
  std::shared_ptr<CancelToken> cancel;  // may be null
  std::function<void(PrefixHit)> done;
};

// One shard's part of a lookup, with its retries. Counted in the client's lookups_ for as long as
// it lives: its guard is the first member, so it is released after everything else here (the
// context, which holds the channel, and the lookup with its `done`) is gone.
struct CacheClient::LookupCall {
  TaskGroup::Held counted;
  std::shared_ptr<Lookup> lookup;
  size_t shard = 0;
  int attempt = 0;
  pb::LookupRequest req;
  pb::LookupResponse resp;
  std::unique_ptr<grpc::ClientContext> ctx;
  std::optional<CancelToken::Attachment> attachment;  // cancels this attempt's ctx

  explicit LookupCall(TaskGroup* group) : counted(group) {}
};

PrefixHit CacheClient::LookupPrefix(const CacheNamespace& ns, const std::vector<int32_t>& tokens, int U) {
  std::promise<PrefixHit> answer;
  std::future<PrefixHit> hit = answer.get_future();
  LookupPrefixAsync(ns, tokens, U, nullptr, [&answer](PrefixHit h) { answer.set_value(std::move(h)); });
  return hit.get();
}

void CacheClient::LookupPrefixAsync(const CacheNamespace& ns, std::vector<int32_t> tokens, int U,
                                    std::shared_ptr<CancelToken> cancel, std::function<void(PrefixHit)> done) {
  auto l = std::make_shared<Lookup>();
  l->ns = ns;
  l->tokens = std::move(tokens);
  const std::vector<int32_t>& prompt = l->tokens;
  l->unit_tokens = U;
  l->chain = ChainKeys(ns.id, prompt, U);
  l->owned.resize(shards_.size());
  l->owned[OwnerOf(ns.id)].push_back(-1);
  for (size_t i = 0; i < l->chain.size(); ++i) l->owned[OwnerOf(l->chain[i])].push_back(static_cast<int>(i));
  l->present.assign(l->chain.size(), 0);
  l->tails.resize(l->chain.size() + 1);
  l->cancel = std::move(cancel);
  l->done = std::move(done);
  std::vector<std::shared_ptr<LookupCall>> calls;
  for (size_t s = 0; s < shards_.size(); ++s) {
    if (l->owned[s].empty()) continue;
    auto call = std::make_shared<LookupCall>(&lookups_);
    call->lookup = l;
    call->shard = s;
    FillNs(ns, call->req.mutable_ns());
    call->req.set_first_is_root(l->owned[s][0] == -1);
    call->req.set_unit_tokens(U);
    call->req.set_prompt_tokens(prompt.size());
    for (int i : l->owned[s]) call->req.add_keys(KeyString(i < 0 ? ns.id : l->chain[i]));
    calls.push_back(std::move(call));
  }
  // The root's shard is always asked, so there is at least one call.
  l->pending.store(static_cast<int>(calls.size()));
  for (auto& call : calls) IssueLookup(std::move(call));
}

void CacheClient::IssueLookup(std::shared_ptr<LookupCall> call) {
  const std::shared_ptr<CancelToken>& cancel = call->lookup->cancel;
  if (cancel && cancel->cancelled()) return EndLookupCall(*call, false);
  call->ctx = std::make_unique<grpc::ClientContext>();
  call->ctx->set_deadline(std::chrono::system_clock::now() + opt_.deadline);
  call->resp.Clear();
  // Attached before the call starts (a token already cancelled cancels it as it starts), detached
  // first thing in its callback: the cancel callback touches this attempt's context.
  if (cancel) call->attachment.emplace(cancel->OnCancel([ctx = call->ctx.get()] { ctx->TryCancel(); }));
  LookupCall* c = call.get();
  shards_[c->shard]->stub->async()->Lookup(c->ctx.get(), &c->req, &c->resp, [this, call = std::move(call)](grpc::Status st) {
    call->attachment.reset();
    if (!st.ok() && Retryable(st) && call->attempt < opt_.retries) {
      ++call->attempt;
      // A timer, not a sleep: no thread waits out the backoff. The alarm owns itself until it fires
      // (gRPC keeps its state alive while the callback runs, so the callback may drop it).
      auto alarm = std::make_shared<grpc::Alarm>();
      alarm->Set(std::chrono::system_clock::now() + opt_.backoff * call->attempt,
                 [this, call, alarm](bool) mutable {
                   alarm.reset();
                   IssueLookup(std::move(call));
                 });
      return;
    }
    EndLookupCall(*call, st.ok());
  });
}

void CacheClient::EndLookupCall(LookupCall& call, bool ok) {
  Lookup& l = *call.lookup;
  const std::vector<int>& owned = l.owned[call.shard];
  if (!ok || call.resp.keys_size() != static_cast<int>(owned.size())) {
    l.down.fetch_add(1, std::memory_order_relaxed);
  } else {
    for (size_t j = 0; j < owned.size(); ++j) {
      const int i = owned[j];
      const auto& kp = call.resp.keys(static_cast<int>(j));
      if (i >= 0) l.present[static_cast<size_t>(i)] = kp.present();
      for (const auto& t : kp.tails()) {
        if (t.key().size() != 32) continue;
        UnitKey k;
        std::memcpy(k.data(), t.key().data(), 32);
        l.tails[static_cast<size_t>(i + 1)].push_back({k, t.tokens()});
      }
    }
  }
  if (l.pending.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  // The last call to end: every other call's writes happened before its decrement.
  PrefixHit hit = MergeLookup(l);
  auto done = std::move(l.done);
  done(std::move(hit));
}

PrefixHit CacheClient::MergeLookup(const Lookup& l) {
  PrefixHit hit;
  const int U = l.unit_tokens;
  hit.shards_down = l.down.load(std::memory_order_relaxed);
  while (hit.full_units < static_cast<int>(l.chain.size()) && l.present[static_cast<size_t>(hit.full_units)])
    ++hit.full_units;
  hit.chain.assign(l.chain.begin(), l.chain.begin() + hit.full_units);
  // The longest tail after the last full unit whose key matches this prompt's tokens.
  const UnitKey& parent = hit.full_units == 0 ? l.ns.id : l.chain[static_cast<size_t>(hit.full_units - 1)];
  const int64_t base = static_cast<int64_t>(hit.full_units) * U;
  for (const auto& [key, t] : l.tails[static_cast<size_t>(hit.full_units)]) {
    if (t == 0 || static_cast<int>(t) >= U || base + t > static_cast<int64_t>(l.tokens.size()) ||
        static_cast<int>(t) <= hit.tail_tokens)
      continue;
    if (TailKey(parent, l.tokens.data() + base, t) == key) {
      hit.tail_tokens = static_cast<int>(t);
      hit.tail_key = key;
    }
  }
  hit.tokens = base + hit.tail_tokens;
  return hit;
}

template <typename Unit>
std::vector<CacheClient::Part> CacheClient::PartsOf(const std::vector<Unit>& units) const {
  std::vector<std::vector<size_t>> owned(shards_.size());
  for (size_t i = 0; i < units.size(); ++i) owned[OwnerOf(units[i].parent ? *units[i].parent : units[i].key)].push_back(i);
  std::vector<Part> parts;
  for (size_t s = 0; s < shards_.size(); ++s) {
    if (owned[s].empty()) continue;
    for (auto& idx : Split(owned[s], StripesFor(*shards_[s], owned[s].size()))) parts.push_back({s, std::move(idx)});
  }
  return parts;
}

PutResult CacheClient::Put(const CacheNamespace& ns, const std::vector<UnitPut>& units) {
  const std::vector<Part> parts = PartsOf(units);
  std::vector<std::vector<size_t>> acks(parts.size());
  std::vector<Status> status(parts.size());
  ForEachPart(parts.size(), [&](size_t i) { status[i] = PutOnShard(*shards_[parts[i].shard], ns, units, parts[i].idx, &acks[i]); });
  PutResult r;
  for (size_t i = 0; i < parts.size(); ++i) {
    const Status& st = status[i];
    const int acked = static_cast<int>(acks[i].size());
    if (ack_log_ != nullptr) ack_log_->Record(ns, units, acks[i]);
    r.acked += acked;
    r.failed += static_cast<int>(parts[i].idx.size()) - acked;
    if (!st.ok() && r.first_error.ok()) r.first_error = st.Prefixed("cache shard " + shards_[parts[i].shard]->name);
  }
  return r;
}

Status CacheClient::PutOnShard(Shard& shard, const CacheNamespace& ns, const std::vector<UnitPut>& units,
                               std::vector<size_t> idx, std::vector<size_t>* acked) {
  const InFlight counted(shard.calls);
  const Deadline deadline = CallDeadline(idx.size());
  Status first_error;
  idx = DataPut(shard, ns, units, idx, deadline, acked, &first_error);
  if (idx.empty()) return first_error;
  Status st = GrpcPut(shard, ns, units, idx, deadline, acked);
  return first_error.ok() ? st : first_error;
}

std::vector<size_t> CacheClient::DataPut(Shard& shard, const CacheNamespace& ns, const std::vector<UnitPut>& units,
                                         const std::vector<size_t>& idx, Deadline deadline,
                                         std::vector<size_t>* acked, Status* first_error) {
  if (!shard.data) return idx;
  std::vector<size_t> sent, rest;
  for (size_t i : idx) (FitsDataPath(units[i]) ? sent : rest).push_back(i);
  if (sent.empty()) return rest;
  std::vector<DataChannel::PutUnit> puts;
  puts.reserve(sent.size());
  for (size_t i : sent) {
    const UnitPut& u = units[i];
    puts.push_back({KeyView(u.key), u.parent ? KeyView(*u.parent) : std::string_view(), u.bytes});
  }
  std::vector<std::optional<Status>> answers(sent.size());  // all unanswered unless Run runs the call
  shard.data->Run(deadline, [&](DataChannel& ch) {
    ch.Put(WireNs(ns), puts, deadline, &answers).IgnoreError();  // what it left unanswered goes over gRPC
    return std::any_of(answers.begin(), answers.end(), [](const auto& a) { return a.has_value(); });
  });
  for (size_t j = 0; j < sent.size(); ++j) {
    if (!answers[j]) {
      rest.push_back(sent[j]);
    } else if (answers[j]->ok()) {
      acked->push_back(sent[j]);
    } else if (first_error->ok()) {
      *first_error = *answers[j];
    }
  }
  return rest;
}

Status CacheClient::GrpcPut(Shard& shard, const CacheNamespace& ns, const std::vector<UnitPut>& units,
                            const std::vector<size_t>& idx, Deadline deadline, std::vector<size_t>* acked) {
  // Streams of at most kBatch units: all writes, then the acks. Acks are tiny, so a batch's acks
  // always fit the flow-control window and neither side can block the other.
  constexpr size_t kBatch = 512;
  for (size_t b = 0; b < idx.size(); b += kBatch) {
    const size_t e = std::min(idx.size(), b + kBatch);
    grpc::ClientContext ctx;
    ctx.set_deadline(SystemDeadline(deadline));  // what the data path left (none: fails at once)
    auto stream = shard.stub->Put(&ctx);
    pb::PutRequest req;
    FillNs(ns, req.mutable_ns());
    for (size_t j = b; j < e; ++j) {
      const UnitPut& u = units[idx[j]];
      req.mutable_ref()->set_key(KeyString(u.key));
      req.mutable_ref()->set_parent(u.parent ? KeyString(*u.parent) : std::string());
      req.set_unit(u.bytes);
      if (!stream->Write(req)) break;
    }
    stream->WritesDone();
    pb::PutAck ack;
    // An ack names its request by its index in this stream.
    while (stream->Read(&ack))
      if (ack.seq() < e - b) acked->push_back(idx[b + ack.seq()]);
    const grpc::Status st = stream->Finish();
    if (!st.ok()) return FromGrpc(st);
  }
  return Status::Ok();
}

std::vector<std::optional<std::string>> CacheClient::Get(const CacheNamespace& ns, const std::vector<UnitGet>& units) {
  std::vector<std::optional<std::string>> out(units.size());
  const std::vector<Part> parts = PartsOf(units);
  ForEachPart(parts.size(), [&](size_t i) { GetOnShard(*shards_[parts[i].shard], ns, units, parts[i].idx, &out); });
  return out;
}

void CacheClient::GetOnShard(Shard& shard, const CacheNamespace& ns, const std::vector<UnitGet>& units,
                             std::vector<size_t> idx, std::vector<std::optional<std::string>>* out) {
  const InFlight counted(shard.calls);
  const Deadline deadline = CallDeadline(idx.size());
  idx = DataGet(shard, ns, units, idx, deadline, out);
  if (!idx.empty()) GrpcGet(shard, ns, units, idx, deadline, out);
}

std::vector<size_t> CacheClient::DataGet(Shard& shard, const CacheNamespace& ns, const std::vector<UnitGet>& units,
                                         const std::vector<size_t>& idx, Deadline deadline,
                                         std::vector<std::optional<std::string>>* out) {
  if (!shard.data) return idx;
  std::vector<std::string_view> keys;
  keys.reserve(idx.size());
  for (size_t i : idx) keys.push_back(KeyView(units[i].key));
  std::vector<std::optional<std::string>> got;
  size_t answered = 0;  // 0 unless Run runs the call
  shard.data->Run(deadline, [&](DataChannel& ch) {
    ch.Get(WireNs(ns), keys, deadline, &got, &answered).IgnoreError();  // the rest goes over gRPC
    return answered > 0;
  });
  for (size_t j = 0; j < answered; ++j) (*out)[idx[j]] = std::move(got[j]);
  return {idx.begin() + static_cast<std::ptrdiff_t>(answered), idx.end()};
}

void CacheClient::GrpcGet(Shard& shard, const CacheNamespace& ns, const std::vector<UnitGet>& units,
                          const std::vector<size_t>& idx, Deadline deadline,
                          std::vector<std::optional<std::string>>* out) {
  for (int attempt = 0; attempt <= opt_.retries; ++attempt) {
    if (attempt > 0) {
      const auto pause = opt_.backoff * attempt;
      if (std::chrono::steady_clock::now() + pause >= deadline) return;  // no time left: the rest are misses
      std::this_thread::sleep_for(pause);
    }
    grpc::ClientContext ctx;
    ctx.set_deadline(SystemDeadline(deadline));  // what the data path left (none: fails at once)
    pb::GetRequest req;
    FillNs(ns, req.mutable_ns());
    for (size_t i : idx) req.add_refs()->set_key(KeyString(units[i].key));
    auto reader = shard.stub->Get(&ctx, req);
    pb::GetResponse r;
    size_t j = 0;
    while (j < idx.size() && reader->Read(&r)) {
      if (r.found()) (*out)[idx[j]] = std::move(*r.mutable_unit());
      ++j;
    }
    const grpc::Status st = reader->Finish();
    if (st.ok() || !Retryable(st) || j > 0) return;  // partial answers are kept; the rest are misses
  }
}

StatusOr<uint64_t> CacheClient::DeleteNamespace(const CacheNamespace& ns) {
  uint64_t total = 0;
  Status first;
  for (auto& sh : shards_) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + opt_.deadline);
    pb::DeleteNamespaceRequest req;
    FillNs(ns, req.mutable_ns());
    pb::DeleteNamespaceResponse resp;
    const grpc::Status st = sh->stub->DeleteNamespace(&ctx, req, &resp);
    if (st.ok()) {
      total += resp.units_deleted();
    } else if (first.ok()) {
      first = FromGrpc(st).Prefixed("cache shard " + sh->name);
    }
  }
  if (!first.ok()) return first;
  return total;
}

StatusOr<std::unique_ptr<CacheClient>> ConnectCache(const std::string& shard_list, const std::string& ack_log,
                                                    ThreadPool* io) {
  if (shard_list.empty()) return std::unique_ptr<CacheClient>();
  CacheClientOptions co;
  co.shards = SplitList(shard_list);
  co.ack_log = ack_log;
  co.io = io;
  return CacheClient::Create(co);
}

}  // namespace ds41
