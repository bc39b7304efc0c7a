#include "cache_service/service.h"

#include <algorithm>
#include <deque>
#include <future>

#include "cache_data/wire.h"
#include "cache_service/grpc_requests.h"
#include "rpc/status_map.h"
#include "unit/unit_key.h"

namespace ds41 {
namespace {

namespace pb = ds41::cache::v1;

}  // namespace

CacheService::CacheService(UnitStore* store, StoreMetrics* metrics, CacheServiceOptions options, ThreadPool* store_io)
    : store_(store),
      metrics_(metrics),
      opt_(std::move(options)),
      checks_(opt_.model_fingerprint, opt_.max_keys_per_request),
      io_(store_io) {}

grpc::Status CacheService::Put(grpc::ServerContext* ctx, grpc::ServerReaderWriter<pb::PutAck, pb::PutRequest>* stream) {
  // Units go to the store in groups (UnitStore::PutMany: one segment write, one index write), at
  // most kPutCallsPerStream store calls at once; each takes every unit read while the previous ones
  // ran, up to write_behind. Acknowledged in order once written; a unit that fails ends the stream
  // with its error (the ones behind it may land, unacknowledged).
  struct Pending {
    CheckedPut put;
    std::string unit;
  };
  using Group = std::future<std::vector<Status>>;
  std::deque<Group> groups;
  std::vector<Pending> pending;
  uint64_t seq = 0;
  const size_t depth = static_cast<size_t>(std::max(1, opt_.write_behind));
  bool gone = false;  // the client stopped reading acks
  auto submit = [&] {
    if (pending.empty()) return;
    groups.push_back(io_->Submit([store = store_, batch = std::move(pending)] {
      std::vector<UnitStore::PutItem> items;
      for (const Pending& p : batch) items.push_back(p.put.Item(p.unit));
      return store->PutMany(items);
    }));
    pending.clear();
  };
  auto ack_front = [&]() -> Status {
    const std::vector<Status> results = groups.front().get();
    groups.pop_front();
    for (const Status& s : results) {
      if (!s.ok()) return s;
      pb::PutAck ack;
      ack.set_seq(seq++);
      gone = gone || !stream->Write(ack);
    }
    return Status::Ok();
  };
  pb::PutRequest req;
  while (stream->Read(&req)) {
    auto put = CheckPutRequest(checks_, req);
    if (!put.ok()) return ToGrpc(put.status());
    pending.push_back({*put, std::move(*req.mutable_unit())});
    while (!groups.empty() && groups.front().wait_for(std::chrono::seconds(0)) == std::future_status::ready && !gone)
      if (Status a = ack_front(); !a.ok()) return ToGrpc(a);
    if (groups.size() < static_cast<size_t>(kPutCallsPerStream)) {
      submit();
    } else if (pending.size() >= depth && !gone) {
      if (Status a = ack_front(); !a.ok()) return ToGrpc(a);
      submit();
    }
    if (gone || ctx->IsCancelled()) break;
  }
  submit();
  while (!groups.empty() && !gone)
    if (Status a = ack_front(); !a.ok()) return ToGrpc(a);
  return grpc::Status::OK;
}

grpc::Status CacheService::Get(grpc::ServerContext* ctx, const pb::GetRequest* req, grpc::ServerWriter<pb::GetResponse>* w) {
  auto checked = CheckGetRequest(checks_, *req);
  if (!checked.ok()) return ToGrpc(checked.status());
  const Key32 ns = checked->ns;
  const std::vector<Key32>& keys = checked->keys;
  // A window of reads in flight, answered in request order, handed to the I/O pool several keys per
  // task: one thread hand-off per unit cost more than the read itself on small machines, and the
  // store reads a task's neighbouring units in one device read. Abandoned reads (error, cancel)
  // finish on the pool on their own: they hold copies of what they need.
  using Read = StatusOr<std::optional<std::string>>;
  constexpr size_t kKeysPerTask = 16;
  std::deque<std::future<std::vector<Read>>> inflight;
  size_t next = 0;
  const size_t depth = std::max<size_t>(1, static_cast<size_t>(std::max(1, opt_.read_ahead)) / kKeysPerTask);
  auto issue = [&] {
    for (; next < keys.size() && inflight.size() < depth; next += kKeysPerTask) {
      std::vector<Key32> chunk(keys.begin() + static_cast<std::ptrdiff_t>(next),
                               keys.begin() + static_cast<std::ptrdiff_t>(std::min(keys.size(), next + kKeysPerTask)));
      inflight.push_back(io_->Submit([store = store_, ns, chunk = std::move(chunk)] { return store->GetMany(ns, chunk); }));
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
      r.set_key(KeyString(keys[i + j]));
      r.set_found(v->has_value());
      if (v->has_value()) r.set_unit(std::move(**v));
      if (!w->Write(r)) return grpc::Status::OK;
    }
  }
  return grpc::Status::OK;
}

grpc::Status CacheService::Lookup(grpc::ServerContext*, const pb::LookupRequest* req, pb::LookupResponse* resp) {
  auto checked = CheckLookupRequest(checks_, *req);
  if (!checked.ok()) return ToGrpc(checked.status());
  auto res = store_->Lookup(checked->ns, checked->keys);
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
      tl->set_key(KeyString(t.key));
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
  auto ns = CheckDeleteNamespaceRequest(checks_, *req);
  if (!ns.ok()) return ToGrpc(ns.status());
  auto n = store_->DeleteNamespace(*ns);
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
  resp->set_data_port(opt_.data_port);
  resp->set_data_wire_version(opt_.data_port > 0 ? wire::kWireVersion : 0);
  resp->set_data_tls(opt_.data_port > 0 && opt_.data_tls);
  return grpc::Status::OK;
}

}  // namespace ds41
