#include "cache_client/cache_client.h"

#include <grpcpp/grpcpp.h>

#include <cstring>
#include <thread>

#include "cache.grpc.pb.h"
#include "rpc/channels.h"
#include "rpc/status_map.h"
#include "util/sha256.h"

namespace ds41 {
namespace {

namespace pb = ds41::cache::v1;

std::string Bytes(const UnitKey& k) { return std::string(reinterpret_cast<const char*>(k.data()), k.size()); }

uint64_t Mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

bool Retryable(const grpc::Status& s) {
  return s.error_code() == grpc::StatusCode::UNAVAILABLE || s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
}

}  // namespace

struct CacheClient::Shard {
  std::string name;
  uint64_t seed = 0;
  std::unique_ptr<pb::Cache::Stub> stub;
};

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
  for (const std::string& a : o.shards) {
    auto s = std::make_unique<Shard>();
    s->name = a;
    Sha256 h;
    h.Update(a);
    auto d = h.Digest();
    std::memcpy(&s->seed, d.data(), 8);
    s->stub = pb::Cache::NewStub(MakeChannel(a, 64 << 20));
    c->shards_.push_back(std::move(s));
  }
  c->pool_ = std::make_unique<ThreadPool>(std::max(2, o.io_threads));
  return c;
}

CacheClient::~CacheClient() = default;

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
  out->set_id(Bytes(ns.id));
  out->set_model_fingerprint(ns.model_fingerprint);
  out->set_format_version(ns.format_version);
}
}  // namespace

PrefixHit CacheClient::LookupPrefix(const CacheNamespace& ns, const std::vector<int32_t>& tokens, int U) {
  PrefixHit hit;
  const std::vector<UnitKey> chain = ChainKeys(ns.id, tokens, U);
  // Per shard: the keys it owns, in chain order; index -1 stands for the root.
  std::vector<std::vector<int>> owned(shards_.size());
  owned[OwnerOf(ns.id)].push_back(-1);
  for (size_t i = 0; i < chain.size(); ++i) owned[OwnerOf(chain[i])].push_back(static_cast<int>(i));
  std::vector<char> present(chain.size(), 0);
  std::vector<std::vector<std::pair<UnitKey, uint32_t>>> tails(chain.size() + 1);  // [i + 1]; [0] = root
  std::vector<std::future<bool>> futs;
  for (size_t s = 0; s < shards_.size(); ++s) {
    if (owned[s].empty()) continue;
    futs.push_back(pool_->Submit([&, s]() -> bool {
      pb::LookupRequest req;
      FillNs(ns, req.mutable_ns());
      req.set_first_is_root(owned[s][0] == -1);
      req.set_unit_tokens(U);
      req.set_prompt_tokens(tokens.size());
      for (int i : owned[s]) req.add_keys(Bytes(i < 0 ? ns.id : chain[i]));
      pb::LookupResponse resp;
      grpc::Status st;
      for (int attempt = 0; attempt <= opt_.retries; ++attempt) {
        if (attempt > 0) std::this_thread::sleep_for(opt_.backoff * attempt);
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + opt_.deadline);
        resp.Clear();
        st = shards_[s]->stub->Lookup(&ctx, req, &resp);
        if (st.ok() || !Retryable(st)) break;
      }
      if (!st.ok() || resp.keys_size() != static_cast<int>(owned[s].size())) return false;
      for (size_t j = 0; j < owned[s].size(); ++j) {
        const int i = owned[s][j];
        const auto& kp = resp.keys(static_cast<int>(j));
        if (i >= 0) present[i] = kp.present();
        for (const auto& t : kp.tails()) {
          if (t.key().size() != 32) continue;
          UnitKey k;
          std::memcpy(k.data(), t.key().data(), 32);
          tails[i + 1].push_back({k, t.tokens()});
        }
      }
      return true;
    }));
  }
  for (auto& f : futs) hit.shards_down += f.get() ? 0 : 1;
  while (hit.full_units < static_cast<int>(chain.size()) && present[hit.full_units]) ++hit.full_units;
  hit.chain.assign(chain.begin(), chain.begin() + hit.full_units);
  // The longest tail after the last full unit whose key matches this prompt's tokens.
  const UnitKey& parent = hit.full_units == 0 ? ns.id : chain[hit.full_units - 1];
  const int64_t base = static_cast<int64_t>(hit.full_units) * U;
  for (const auto& [key, t] : tails[hit.full_units]) {
    if (t == 0 || static_cast<int>(t) >= U || base + t > static_cast<int64_t>(tokens.size()) || static_cast<int>(t) <= hit.tail_tokens)
      continue;
    if (TailKey(parent, tokens.data() + base, t) == key) {
      hit.tail_tokens = static_cast<int>(t);
      hit.tail_key = key;
    }
  }
  hit.tokens = base + hit.tail_tokens;
  return hit;
}

PutResult CacheClient::Put(const CacheNamespace& ns, const std::vector<UnitPut>& units) {
  std::vector<std::vector<size_t>> owned(shards_.size());
  for (size_t i = 0; i < units.size(); ++i) owned[OwnerOf(units[i].parent ? *units[i].parent : units[i].key)].push_back(i);
  std::vector<std::future<std::pair<int, Status>>> futs;
  for (size_t s = 0; s < shards_.size(); ++s) {
    if (owned[s].empty()) continue;
    futs.push_back(pool_->Submit([&, s]() -> std::pair<int, Status> {
      // Streams of at most kBatch units: all writes, then the acks. Acks are tiny, so a batch's acks
      // always fit the flow-control window and neither side can block the other.
      constexpr size_t kBatch = 512;
      int acked = 0;
      for (size_t b = 0; b < owned[s].size(); b += kBatch) {
        const size_t e = std::min(owned[s].size(), b + kBatch);
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + opt_.deadline * static_cast<int64_t>(1 + (e - b) / 64));
        auto stream = shards_[s]->stub->Put(&ctx);
        pb::PutRequest req;
        FillNs(ns, req.mutable_ns());
        for (size_t j = b; j < e; ++j) {
          const UnitPut& u = units[owned[s][j]];
          req.mutable_ref()->set_key(Bytes(u.key));
          req.mutable_ref()->set_parent(u.parent ? Bytes(*u.parent) : std::string());
          req.set_unit(u.bytes);
          if (!stream->Write(req)) break;
        }
        stream->WritesDone();
        pb::PutAck ack;
        while (stream->Read(&ack)) ++acked;
        const grpc::Status st = stream->Finish();
        if (!st.ok()) return {acked, FromGrpc(st)};
      }
      return {acked, Status::Ok()};
    }));
  }
  PutResult r;
  size_t k = 0;
  for (size_t s = 0; s < shards_.size(); ++s) {
    if (owned[s].empty()) continue;
    auto [acked, st] = futs[k++].get();
    r.acked += acked;
    r.failed += static_cast<int>(owned[s].size()) - acked;
    if (!st.ok() && r.first_error.ok()) r.first_error = st.Prefixed("cache shard " + shards_[s]->name);
  }
  return r;
}

std::vector<std::optional<std::string>> CacheClient::Get(const CacheNamespace& ns, const std::vector<UnitGet>& units) {
  std::vector<std::optional<std::string>> out(units.size());
  std::vector<std::vector<size_t>> owned(shards_.size());
  for (size_t i = 0; i < units.size(); ++i) owned[OwnerOf(units[i].parent ? *units[i].parent : units[i].key)].push_back(i);
  std::vector<std::future<void>> futs;
  for (size_t s = 0; s < shards_.size(); ++s) {
    if (owned[s].empty()) continue;
    futs.push_back(pool_->Submit([&, s] {
      for (int attempt = 0; attempt <= opt_.retries; ++attempt) {
        if (attempt > 0) std::this_thread::sleep_for(opt_.backoff * attempt);
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + opt_.deadline * static_cast<int64_t>(1 + owned[s].size() / 64));
        pb::GetRequest req;
        FillNs(ns, req.mutable_ns());
        for (size_t i : owned[s]) req.add_refs()->set_key(Bytes(units[i].key));
        auto reader = shards_[s]->stub->Get(&ctx, req);
        pb::GetResponse r;
        size_t j = 0;
        while (j < owned[s].size() && reader->Read(&r)) {
          if (r.found()) out[owned[s][j]] = std::move(*r.mutable_unit());
          ++j;
        }
        const grpc::Status st = reader->Finish();
        if (st.ok() || !Retryable(st) || j > 0) return;  // partial answers are kept; the rest are misses
      }
    }));
  }
  for (auto& f : futs) f.get();
  return out;
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

}  // namespace ds41
