// DecoderCore: the decoder node's work without transport (MODEL.md §10.6 step 3, SERVING.md §2).
// A request's prefix global KV comes from its session's warm state or from the cache; the encoder
// computes the rest (PrefillCall); decoder replay over the last window positions gives the first
// token; then the sequence joins the batch loop, where all running sequences decode together one
// token per step (continuous batching: they join and leave between steps). At a turn's end the
// generated units go to the cache, the session stays warm (byte budget, TTL) and its SWA state is
// kept in the pool for whoever continues it.
//
// Thread-safe: Generate may be called from many threads; one batch thread runs the decode steps.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "encoder_node/encoder_core.h"
#include "engine/engine.h"
#include "engine/expert_cache.h"
#include "engine/sampling.h"

namespace ds41 {

struct GenerateInput {
  std::string request_id, session_id;
  UnitKey ns{};
  std::vector<int32_t> tokens;      // prompt [0, N)
  int64_t cached_tokens = 0;        // H from the router
  std::string encoder;              // encoder address
  std::string swa_peer;             // who may hold the SWA state at H
  SamplingParams sampling;
  uint32_t max_tokens = 16;
  std::vector<int32_t> stop_ids;
  int unit_tokens = kDefaultUnitTokens;
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::now() + std::chrono::seconds(600);
};

struct GenerateUsage {
  int64_t prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0, computed_tokens = 0;
  int64_t encoder_replay_tokens = 0, decoder_replay_tokens = 0;
  std::string prefix_source, swa_source;
  double ttft_seconds = 0;
};

// The output of one request: tokens pushed by the core, popped by the transport.
class TokenStream {
 public:
  void Push(int32_t token);
  void Finish(Status status, std::string reason, GenerateUsage usage);
  // Moves pending tokens into `out`, waiting up to `wait` when there are none; true once finished and
  // drained.
  bool Pop(std::vector<int32_t>* out, std::chrono::milliseconds wait);
  void Cancel() { cancelled_ = true; }
  bool cancelled() const { return cancelled_; }
  Status status() const;
  std::string finish_reason() const;
  GenerateUsage usage() const;

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<int32_t> tokens_;
  bool done_ = false;
  Status status_;
  std::string reason_;
  GenerateUsage usage_;
  std::atomic<bool> cancelled_{false};
};

using PrefillCall = std::function<StatusOr<PrefillOutput>(const std::string& encoder, const PrefillInput& in,
                                                          std::chrono::steady_clock::time_point deadline)>;

struct DecoderOptions {
  uint64_t expert_cache_bytes = 0;       // 0: experts straight from the mapping
  uint64_t session_bytes = 8ull << 30;   // warm sessions kept within this
  int64_t session_ttl_ms = 15 * 60 * 1000;
  uint64_t swa_pool_bytes = 2ull << 30;
  int64_t swa_ttl_ms = 15 * 60 * 1000;
  int max_running = 64;
};

class DecoderCore {
 public:
  DecoderCore(const Model& model, CacheClient* cache, PrefillCall prefill, DecoderOptions options, NodeMetrics* metrics,
              ThreadPool* compute);
  ~DecoderCore();

  std::shared_ptr<TokenStream> Generate(GenerateInput in);
  std::optional<std::string> GetSwa(const UnitKey& ns, const UnitKey& prefix_key);

  int64_t running() const;
  int64_t waiting() const { return waiting_.load(); }
  uint64_t ResidentBytes() const;  // sessions + running states + SWA pool + expert cache
  std::vector<std::pair<std::string, int64_t>> WarmSessions() const;  // (session, context length held)

 private:
  struct Sequence;
  struct Session {
    SequenceState state;
    std::vector<int32_t> tokens;  // [0, state.length)
    UnitKey ns{};
    int64_t last_used_ms = 0;
  };
  Status Admit(const GenerateInput& in, const std::shared_ptr<TokenStream>& stream);
  void BatchLoop();
  void Finish(std::unique_ptr<Sequence> seq, const std::string& reason);
  int64_t LoadPrefixFromCache(const GenerateInput& in, int64_t boundary, SequenceState* st);
  void UpdateResidency();

  const Model& model_;
  std::unique_ptr<ExpertCache> experts_;
  Engine engine_;
  CacheClient* cache_;
  PrefillCall prefill_;
  DecoderOptions opt_;
  NodeMetrics* metrics_;
  SwaPool swa_pool_;
  std::unique_ptr<ThreadPool> io_;
  std::atomic<int64_t> waiting_{0};
  std::atomic<int64_t> stepping_{0};  // sequences taken out of running_ for the current step

  mutable std::mutex mu_;  // guards running_, sessions_
  std::condition_variable cv_;
  std::vector<std::unique_ptr<Sequence>> running_;
  std::map<std::string, Session> sessions_;
  bool stop_ = false;
  std::thread loop_;
};

}  // namespace ds41
