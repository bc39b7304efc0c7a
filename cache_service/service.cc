#include "cache_service/service.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <future>

#include "rpc/status_map.h"
#include "unit/unit_format.h"

namespace ds41 {
namespace {

namespace pb = ds41::cache::v1;

bool ToKey(const std::string& bytes, Key32* k) {
  if (bytes.size() != 32) return false;
  std::memcpy(k->data(), bytes.data(), 32);
  return true;
}

std::string FromKey(const Key32& k) { return std::string(reinterpret_cast<const char*>(k.data()), 32); }

}  // namespace

CacheService::CacheService(UnitStore* store, StoreMetrics* metrics, CacheServiceOptions options)
    : store_(store),
      metrics_(metrics),
      opt_(std::move(options)),
      io_(std::make_unique<ThreadPool>(std::max(2, opt_.io_threads))) {}

Status CacheService::CheckNamespace(const pb::Namespace& ns, Key32* id) const {
  if (!ToKey(ns.id(), id)) return InvalidArgumentError("namespace id must be 32 bytes");
  if (ns.format_version() != kUnitFormatVersion)
    return InvalidArgumentError("unit format version " + std::to_string(ns.format_version()) + " is not served here (" +
                                std::to_string(kUnitFormatVersion) + ")");
  if (!ParseFingerprint(ns.model_fingerprint()).ok()) return InvalidArgumentError("namespace model fingerprint is malformed");
  if (!opt_.model_fingerprint.empty() && ns.model_fingerprint() != opt_.model_fingerprint)
    return InvalidArgumentError("foreign namespace: this cache serves model " + opt_.model_fingerprint.substr(0, 12) +
                                "..., not " + ns.model_fingerprint().substr(0, 12) + "...");
  return Status::Ok();
}

grpc::Status CacheService::Put(grpc::ServerContext* ctx, grpc::ServerReaderWriter<pb::PutAck, pb::PutRequest>* stream) {
  pb::PutRequest req;
  uint64_t seq = 0;
  // Writes in flight, acknowledged in order once each has returned; one that fails ends the stream
  // with its error (the ones behind it may land, unacknowledged).
  std::deque<std::future<Status>> inflight;
  const size_t depth = static_cast<size_t>(std::max(1, opt_.write_behind));
  bool gone = false;  // the client stopped reading acks
  auto ack_front = [&]() -> Status {
    Status s = inflight.front().get();
    inflight.pop_front();
    if (!s.ok()) return s;
    pb::PutAck ack;
    ack.set_seq(seq++);
    gone = gone || !stream->Write(ack);
    return Status::Ok();
  };
  while (stream->Read(&req)) {
    Key32 ns{}, key{}, parent{};
    Status s = CheckNamespace(req.ns(), &ns);
    if (s.ok() && !ToKey(req.ref().key(), &key)) s = InvalidArgumentError("unit key must be 32 bytes");
    const bool tail = !req.ref().parent().empty();
    if (s.ok() && tail && !ToKey(req.ref().parent(), &parent)) s = InvalidArgumentError("parent key must be 32 bytes");
    if (s.ok() && req.unit().size() > kMaxUnitBytes) s = InvalidArgumentError("unit exceeds " + std::to_string(kMaxUnitBytes) + " bytes");
    UnitHeader h;
    if (s.ok()) {
      auto hv = VerifyUnitBytes(req.unit());
      if (!hv.ok()) {
        s = InvalidArgumentError("malformed unit: " + hv.status().message());
      } else {
        h = *hv;
        if (h.tail != tail) s = InvalidArgumentError("a tail unit needs a parent key and a full unit none");
        auto fp = ParseFingerprint(req.ns().model_fingerprint());
        if (s.ok() && (!fp.ok() || *fp != h.model)) s = InvalidArgumentError("unit was made by another model than its namespace");
      }
    }
    if (!s.ok()) return ToGrpc(s);
    inflight.push_back(io_->Submit([store = store_, ns, key, parent, tail, tokens = static_cast<uint32_t>(h.tokens),
                                    unit = std::move(*req.mutable_unit())] {
      return store->Put(ns, key, tail ? &parent : nullptr, tokens, unit);
    }));
    while (inflight.size() >= depth && !gone)
      if (Status a = ack_front(); !a.ok()) return ToGrpc(a);
    if (gone || ctx->IsCancelled()) break;
  }
  while (!inflight.empty() && !gone)
    if (Status a = ack_front(); !a.ok()) return ToGrpc(a);
  return grpc::Status::OK;
}

grpc::Status CacheService::Get(grpc::ServerContext* ctx, const pb::GetRequest* req, grpc::ServerWriter<pb::GetResponse>* w) {
  Key32 ns;
  if (Status s = CheckNamespace(req->ns(), &ns); !s.ok()) return ToGrpc(s);
  if (static_cast<size_t>(req->refs_size()) > opt_.max_keys_per_request) return ToGrpc(InvalidArgumentError("too many keys"));
  std::vector<Key32> keys(req->refs_size());
  for (int i = 0; i < req->refs_size(); ++i)
    if (!ToKey(req->refs(i).key(), &keys[i])) return ToGrpc(InvalidArgumentError("unit key must be 32 bytes"));
  // A window of reads in flight, answered in request order, handed to the I/O pool a few keys per
  // task: one thread hand-off per unit cost more than the read itself on small machines. Abandoned
  // reads (error, cancel) finish on the pool on their own: they hold copies of what they need.
  using Read = StatusOr<std::optional<std::string>>;
  constexpr size_t kKeysPerTask = 2;
  std::deque<std::future<std::vector<Read>>> inflight;
  size_t next = 0;
  const size_t depth = std::max<size_t>(1, static_cast<size_t>(std::max(1, opt_.read_ahead)) / kKeysPerTask);
  auto issue = [&] {
    for (; next < keys.size() && inflight.size() < depth; next += kKeysPerTask) {
      std::vector<Key32> chunk(keys.begin() + static_cast<std::ptrdiff_t>(next),
                               keys.begin() + static_cast<std::ptrdiff_t>(std::min(keys.size(), next + kKeysPerTask)));
      inflight.push_back(io_->Submit([store = store_, ns, chunk = std::move(chunk)] {
        std::vector<Read> out;
        out.reserve(chunk.size());
        for (const Key32& k : chunk) out.push_back(store->Get(ns, k));
        return out;
      }));
    }
  };
  issue();
  for (size_t i = 0; i < keys.size(); i += kKeysPerTask) {
    if (ctx->IsCancelled()) return grpc::Status::CANCELLED;
    std::vector<Read> reads = inflight.front().get();
    inflight.pop_front();
    issue();
    for (size_t j = 0; j < reads.size(); ++j) {
      Read& v = reads[j];
      if (!v.ok()) return ToGrpc(v.status());
      pb::GetResponse r;
      r.set_key(FromKey(keys[i + j]));
      r.set_found(v->has_value());
      if (v->has_value()) r.set_unit(std::move(**v));
      if (!w->Write(r)) return grpc::Status::OK;
    }
  }
  return grpc::Status::OK;
}

grpc::Status CacheService::Lookup(grpc::ServerContext*, const pb::LookupRequest* req, pb::LookupResponse* resp) {
  Key32 ns;
  if (Status s = CheckNamespace(req->ns(), &ns); !s.ok()) return ToGrpc(s);
  if (static_cast<size_t>(req->keys_size()) > opt_.max_keys_per_request) return ToGrpc(InvalidArgumentError("too many keys"));
  if (req->first_is_root() && req->keys_size() == 0) return ToGrpc(InvalidArgumentError("first_is_root without keys"));
  std::vector<Key32> keys(req->keys_size());
  for (int i = 0; i < req->keys_size(); ++i)
    if (!ToKey(req->keys(i), &keys[i])) return ToGrpc(InvalidArgumentError("key must be 32 bytes"));
  auto res = store_->Lookup(ns, keys);
  if (!res.ok()) return ToGrpc(res.status());
  size_t units = 0, present = 0;
  uint64_t hit_tokens = 0;
  for (size_t i = 0; i < res->size(); ++i) {
    const Presence& p = (*res)[i];
    auto* kp = resp->add_keys();
    kp->set_present(p.present);
    kp->set_tokens(p.tokens);
    for (const TailMarker& t : p.tails) {
      auto* tl = kp->add_tails();
      tl->set_key(FromKey(t.key));
      tl->set_tokens(t.tokens);
    }
    if (i == 0 && req->first_is_root()) continue;
    ++units;
    if (p.present) {
      ++present;
      hit_tokens += p.tokens;
    }
  }
  // This server's share: its unit keys, plus the prompt's remainder for the root's owner, so the
  // shards' queried tokens add up to the prompt.
  const uint64_t U = req->unit_tokens();
  const uint64_t queried = units * U + (req->first_is_root() && U > 0 ? req->prompt_tokens() % U : 0);
  metrics_->queried_tokens.Increment(static_cast<double>(queried));
  metrics_->hit_tokens.Increment(static_cast<double>(hit_tokens));
  if (units == 0) {
    metrics_->lookups_below_unit.Increment();
  } else if (present == units) {
    metrics_->lookups_hit.Increment();
  } else if (present == 0) {
    metrics_->lookups_miss.Increment();
  } else {
    metrics_->lookups_partial.Increment();
  }
  return grpc::Status::OK;
}

grpc::Status CacheService::DeleteNamespace(grpc::ServerContext*, const pb::DeleteNamespaceRequest* req,
                                           pb::DeleteNamespaceResponse* resp) {
  Key32 ns;
  if (Status s = CheckNamespace(req->ns(), &ns); !s.ok()) return ToGrpc(s);
  auto n = store_->DeleteNamespace(ns);
  if (!n.ok()) return ToGrpc(n.status());
  resp->set_units_deleted(*n);
  return grpc::Status::OK;
}

grpc::Status CacheService::Stats(grpc::ServerContext*, const pb::StatsRequest*, pb::StatsResponse* resp) {
  const StoreStats st = store_->stats();
  resp->set_units(st.units);
  resp->set_bytes(st.bytes);
  resp->set_capacity_bytes(st.capacity);
  resp->set_model_fingerprint(opt_.model_fingerprint);
  return grpc::Status::OK;
}

}  // namespace ds41
