// ReplyRecords: the token ids of the chat replies this cluster generated, kept in the cache store
// (unit/reply_record.h) under the tenant's namespace, so that a later turn that sends a reply back
// gets exactly those ids in its prompt, whichever router replica serves it and after restarts
// (docs/session_reuse.md). Records are bounded and expire with the units (the store's byte budget
// and TTL). Thread-safe: immutable after construction; the cache client is thread-safe.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cache_client/cache_client.h"
#include "chat/chat_render.h"
#include "router/router_metrics.h"
#include "unit/unit_format.h"
#include "util/status.h"

namespace ds41 {

class ReplyRecords {
 public:
  // `fingerprint_hex`: the model's (the namespaces'); `vocab`: ids a record may hold.
  static StatusOr<std::unique_ptr<ReplyRecords>> Create(CacheClient* cache, const std::string& fingerprint_hex,
                                                        int32_t vocab, RouterMetrics* metrics);

  // One entry per digest, in order: the ids recorded for it, or nullopt (none recorded, expired,
  // its shard down, or a record that fails its checks: never an error, the message then renders
  // as sent). Counted as splices: the caller puts every record found into the prompt.
  std::vector<std::optional<std::vector<int32_t>>> Find(const std::string& tenant_salt,
                                                        const std::vector<chat::ReplyDigest>& digests) const;

  // Stores the ids of a reply; returns once its shard has it durably (read-your-writes for the
  // client's next turn). REQUIRES: 1 <= ids.size() <= kMaxReplyRecordIds.
  Status Record(const std::string& tenant_salt, const chat::ReplyDigest& digest, const std::vector<int32_t>& ids) const;

 private:
  ReplyRecords(CacheClient* cache, std::string fingerprint_hex, const Fingerprint& model, int32_t vocab,
               RouterMetrics* metrics)
      : cache_(cache), fingerprint_hex_(std::move(fingerprint_hex)), model_(model), vocab_(vocab), metrics_(metrics) {}

  CacheClient* cache_;
  std::string fingerprint_hex_;
  Fingerprint model_;
  int32_t vocab_;
  RouterMetrics* metrics_;
};

}  // namespace ds41
