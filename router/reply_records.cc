#include "router/reply_records.h"

#include "unit/reply_record.h"
#include "unit/unit_key.h"

namespace ds41 {

StatusOr<std::unique_ptr<ReplyRecords>> ReplyRecords::Create(CacheClient* cache, const std::string& fingerprint_hex,
                                                             int32_t vocab, RouterMetrics* metrics) {
  if (cache == nullptr) return InvalidArgumentError("reply records need a cache");
  DS41_ASSIGN_OR_RETURN(Fingerprint model, ParseFingerprint(fingerprint_hex));
  return std::unique_ptr<ReplyRecords>(new ReplyRecords(cache, fingerprint_hex, model, vocab, metrics));
}

std::vector<std::optional<std::vector<int32_t>>> ReplyRecords::Find(const std::string& tenant_salt,
                                                                    const std::vector<chat::ReplyDigest>& digests) const {
  std::vector<std::optional<std::vector<int32_t>>> out(digests.size());
  if (digests.empty()) return out;
  const CacheNamespace ns = CacheNamespace::Make(fingerprint_hex_, tenant_salt);
  std::vector<UnitGet> gets;
  gets.reserve(digests.size());
  for (const chat::ReplyDigest& d : digests) gets.push_back({ReplyKey(ns.id, d), std::nullopt});
  std::vector<std::optional<std::string>> got = cache_->Get(ns, gets);
  for (size_t i = 0; i < got.size() && i < out.size(); ++i) {
    if (!got[i]) {
      if (metrics_) metrics_->ReplyLookup("not_found");
      continue;
    }
    auto ids = DecodeReplyRecord(*got[i], model_, vocab_);
    if (!ids.ok()) {
      if (metrics_) metrics_->ReplyLookup("invalid");
      continue;
    }
    if (metrics_) metrics_->ReplySpliced(static_cast<int64_t>(ids->size()));
    out[i] = std::move(*ids);
  }
  return out;
}

Status ReplyRecords::Record(const std::string& tenant_salt, const chat::ReplyDigest& digest,
                            const std::vector<int32_t>& ids) const {
  const CacheNamespace ns = CacheNamespace::Make(fingerprint_hex_, tenant_salt);
  PutResult r = cache_->Put(ns, {{ReplyKey(ns.id, digest), std::nullopt, EncodeReplyRecord(model_, ids)}});
  const bool ok = r.acked == 1;
  if (metrics_) metrics_->ReplyRecorded(ok ? "stored" : "failed");
  if (ok) return Status::Ok();
  return r.first_error.ok() ? UnavailableError("no cache shard acknowledged the reply record") : r.first_error;
}

}  // namespace ds41
