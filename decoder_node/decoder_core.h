// DecoderCore: the decoder node's work without transport (MODEL.md §10.6 step 3, SERVING.md §2).
// A request's prefix global KV comes from its session's warm state or from the cache; the encoder
// computes the rest (PrefillCall); decoder replay over the last window positions gives the first
// token; then the sequence joins the batch loop, where all running sequences decode together one
// token per step (continuous batching: they join and leave between steps). At a turn's end the
// generated units go to the cache, the session stays warm (byte budget, TTL) and its SWA state is
// kept in the pool for whoever continues it. A migrated request (GenerateInput::resumed: another
// decoder died after streaming part of the reply) is admitted on its prompt exactly as before, then
// the streamed tokens are recomputed rather than sampled, so the rest equals an uninterrupted run.
// With speculation on (DecoderOptions::speculative, a model with DSpark layers), each step drafts a
// block per sequence and verifies the k the scheduler picks in one batched pass (engine/
// speculation.h); the cost curve it uses is measured at construction unless given. Greedy replies are the plain
// decode's bit for bit; sampled ones follow the same distribution, but the seeded draws differ from
// a plain run's, so a migrated sampled request continues with other (equally distributed) tokens.
//
// Thread-safe: Generate and Start may be called from many threads; admissions (prefix, prefill,
// replay) run on the caller's thread (Generate) or the core's admission threads (Start); one batch
// thread runs the decode steps, and mu_ guards the running sequences it shares with admissions.
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "engine/expert_cache.h"
#include "engine/sampling.h"
#include "engine/speculation.h"
#include "grammar/grammar_cache.h"
#include "grammar/token_mask.h"
#include "node_client/node_client.h"
#include "node_client/node_messages.h"
#include "serving/engine_prompt.h"
#include "serving/node_executors.h"
#include "serving/node_metrics.h"
#include "serving/prefix_loader.h"
#include "serving/session_cache.h"
#include "serving/swa_pool.h"
#include "serving/unit_persister.h"
#include "util/cancel_token.h"
#include "util/mutex.h"
#include "util/task_group.h"
#include "util/thread_annotations.h"

namespace ds41 {

// The output of one request: tokens pushed by the core, taken by the transport. A listener, when
// set, is told of every push, of the finish and of a cancel, so the transport needs no polling.
//
// Thread-safe.
class TokenStream {
 public:
  // `logprob`: the token's log-probabilities, when the request asked for them (every push then has one).
  void Push(int32_t token, const TokenLogprob* logprob = nullptr);
  void Finish(Status status, std::string reason, GenerateUsage usage);
  // Moves pending tokens into `out`, waiting up to `wait` when there are none; true once finished and
  // drained.
  bool Pop(std::vector<int32_t>* out, std::chrono::milliseconds wait);
  // Without waiting, with the log-probabilities.
  bool Take(GeneratedTokens* out);
  // Runs on every Push and Finish, on the pushing thread, never after SetListener(nullptr) returned.
  void SetListener(std::function<void()> listener);

  // The consumer is gone: the core stops the request at its next step, and interrupts a prefill call.
  void Cancel(CancelReason reason = CancelReason::kClient) { cancel_.Cancel(reason); }
  bool cancelled() const { return cancel_.cancelled(); }
  CancelToken* cancel_token() { return &cancel_; }
  Status status() const;
  std::string finish_reason() const;
  GenerateUsage usage() const;

 private:
  void Notify();

  mutable Mutex mu_;
  CondVar cv_;
  std::deque<int32_t> tokens_ DS41_GUARDED_BY(mu_);
  std::deque<TokenLogprob> logprobs_ DS41_GUARDED_BY(mu_);  // empty, or one per token
  bool done_ DS41_GUARDED_BY(mu_) = false;
  Status status_ DS41_GUARDED_BY(mu_);
  std::string reason_ DS41_GUARDED_BY(mu_);
  GenerateUsage usage_ DS41_GUARDED_BY(mu_);
  CancelToken cancel_;
  Mutex listener_mu_;  // held while the listener runs
  std::function<void()> listener_ DS41_GUARDED_BY(listener_mu_);
};

// Starts an encoder's Prefill (NodeClient::PrefillAsync in a node): `done` gets the outcome once, on
// another thread, and must not block; a cancelled token interrupts the call.
using PrefillCall = std::function<void(const std::string& encoder, const PrefillInput& in,
                                       std::chrono::steady_clock::time_point deadline, std::shared_ptr<CancelToken> cancel,
                                       std::function<void(StatusOr<PrefillOutput>)> done)>;
// The PrefillCall of a node: `encoders`' PrefillAsync. `encoders` outlives the core.
inline PrefillCall PrefillThrough(const NodeClient* encoders) {
  return [encoders](const std::string& encoder, const PrefillInput& in, std::chrono::steady_clock::time_point deadline,
                    std::shared_ptr<CancelToken> cancel, std::function<void(StatusOr<PrefillOutput>)> done) {
    encoders->PrefillAsync(encoder, in, deadline, std::move(cancel), std::move(done));
  };
}

struct DecoderOptions {
  uint64_t expert_cache_bytes = 0;       // 0: experts straight from the mapping
  uint64_t session_bytes = 8ull << 30;   // warm sessions kept within this
  int64_t session_ttl_ms = 15 * 60 * 1000;
  uint64_t swa_pool_bytes = 2ull << 30;
  int64_t swa_ttl_ms = 15 * 60 * 1000;
  int max_running = 64;
  bool speculative = false;              // DSpark drafts verified per step (ignored without DSpark layers)
  // The model's vocabulary as masks for constrained decoding (GenerateSampling::response_json,
  // tool_calls); null: such requests are refused with FAILED_PRECONDITION. Outlives the core.
  const grammar::TokenMasker* masker = nullptr;
  std::optional<VerifyCostCurve> verify_cost;  // the scheduler's curve; unset: measured at construction
};

class DecoderCore {
 public:
  // The engine's kernels run on `pools.compute`, admissions (and their replays) on `pools.requests`,
  // reply-unit puts on `pools.io` (serving/node_executors.h); the pools outlive the core.
  // `spec_metrics` (or null) counts speculation.
  DecoderCore(const Model& model, CacheClient* cache, PrefillCall prefill, DecoderOptions options, NodeMetrics* metrics,
              const NodeExecutors& pools, SpeculationMetrics* spec_metrics = nullptr);
  ~DecoderCore();

  // Admits the request on this thread (until its first token or its error, waiting for the
  // encoder's prefill), then decodes it in the batch loop; the stream carries the rest.
  std::shared_ptr<TokenStream> Generate(GenerateInput in);
  // The same without waiting: returns at once. The admission's work runs on the core's admission
  // threads (as many as cores: no thread waits while the encoder prefills), in two parts split at
  // the prefill call.
  void Start(GenerateInput in, std::shared_ptr<TokenStream> stream);

  int64_t running() const;
  bool speculating() const { return speculator_ != nullptr; }
  int64_t waiting() const { return waiting_.load(); }
  uint64_t ResidentBytes() const;  // sessions + running states + SWA pool + expert cache
  std::vector<std::pair<std::string, int64_t>> WarmSessions() const { return sessions_.List(); }
  SwaPool* swa_pool() { return &swa_pool_; }  // served to peers by SwaStateService

 private:
  struct Sequence;
  struct Admission;  // a request from its arrival to its first token
  // The admission up to the encoder's prefill: the request checked (CANCELLED when its stream
  // already is), its prefix from the warm session or the store, the prefill's input built.
  StatusOr<std::unique_ptr<Admission>> AdmitBegin(GenerateInput in, const std::shared_ptr<TokenStream>& stream);
  // The rest, once the prefill answered: its units applied, the replay, the first token; the
  // sequence then joins the batch loop.
  Status AdmitEnd(Admission& a, StatusOr<PrefillOutput> prefilled);
  // The admission's end: one waiting fewer, and a failure counted and sent down the stream.
  void EndAdmission(const Status& s, const std::shared_ptr<TokenStream>& stream);
  // A migrated request, its prompt [0, P) replayed into `state` with `logits` at P - 1: recomputes
  // the resumed tokens [P, N) as the failed attempt's decode steps did, leaving `logits` at N - 1,
  // and advances `rng` past the draws those tokens took.
  // `dspark_hidden` (or null) gets the resumed rows' DSpark input.
  // `shaped`: the sequence's logits are shaped (penalties, bias, a grammar), so the replay's raw
  // argmax is no check on the first resumed token.
  Status Resume(const GenerateInput& in, int64_t P, const SamplingParams& sampling, bool shaped, SequenceState* state,
                std::vector<float>* logits, Rng* rng, std::vector<float>* dspark_hidden);
  // Measures the verification cost curve and starts the speculator (a line on stderr either way).
  void StartSpeculation();
  void BatchLoop();
  // One step's tokens per sequence of `live` (in order): a plain decode step or a speculative one.
  Status DecodeStep(const std::vector<std::unique_ptr<Sequence>>& live, std::vector<GeneratedTokens>* emitted);
  void Finish(std::unique_ptr<Sequence> seq, const std::string& reason);
  void UpdateResidency();

  const Model& model_;
  std::unique_ptr<ExpertCache> experts_;
  Engine engine_;
  PrefillCall prefill_;
  DecoderOptions opt_;
  NodeMetrics* metrics_;
  SpeculationMetrics* spec_metrics_;
  std::unique_ptr<Speculator> speculator_;  // null: plain decode
  SwaPool swa_pool_;
  SessionCache sessions_;
  PrefixLoader loader_;
  UnitPersister persister_;
  grammar::GrammarCache grammars_;  // response schemas and tool-call specs compiled once
  std::atomic<int64_t> waiting_{0};
  std::atomic<int64_t> stepping_{0};  // sequences taken out of running_ for the current step

  mutable Mutex mu_;
  CondVar cv_;
  std::vector<std::unique_ptr<Sequence>> running_ DS41_GUARDED_BY(mu_);
  bool stop_ DS41_GUARDED_BY(mu_) = false;
  std::thread loop_;
  // Admissions on the requests pool, and the prefill calls whose answers will schedule their second
  // half (held): the destructor waits for both before it stops the loop they hand sequences to.
  TaskGroup admissions_;
};

}  // namespace ds41
