#include "decoder_node/decoder_core.h"

#include <algorithm>
#include <future>
#include <iostream>
#include <limits>

#include "engine/sampling.h"
#include "node_client/node_codec.h"
#include "unit/state_units.h"
#include "util/clock.h"
#include "util/mutex.h"
#include "util/thread_scratch.h"

namespace ds41 {

// ---- TokenStream ---------------------------------------------------------------------------------

void TokenStream::Push(int32_t token, const TokenLogprob* logprob) {
  {
    MutexLock l(&mu_);
    tokens_.push_back(token);
    if (logprob != nullptr) logprobs_.push_back(*logprob);
  }
  cv_.NotifyAll();
  Notify();
}

void TokenStream::SetListener(std::function<void()> listener) {
  MutexLock l(&listener_mu_);
  listener_ = std::move(listener);
}

void TokenStream::Notify() {
  MutexLock l(&listener_mu_);
  if (listener_) listener_();
}

void TokenStream::Finish(Status status, std::string reason, GenerateUsage usage) {
  {
    MutexLock l(&mu_);
    done_ = true;
    status_ = std::move(status);
    reason_ = std::move(reason);
    usage_ = std::move(usage);
  }
  cv_.NotifyAll();
  Notify();
}

bool TokenStream::Pop(std::vector<int32_t>* out, std::chrono::milliseconds wait) {
  MutexLock l(&mu_);
  if (tokens_.empty() && !done_ && wait.count() > 0)
    cv_.WaitFor(&mu_, wait, [this]() DS41_REQUIRES(mu_) { return done_ || !tokens_.empty(); });
  out->assign(tokens_.begin(), tokens_.end());
  tokens_.clear();
  logprobs_.clear();
  return done_;
}

bool TokenStream::Take(GeneratedTokens* out) {
  MutexLock l(&mu_);
  out->ids.assign(tokens_.begin(), tokens_.end());
  out->logprobs.assign(std::make_move_iterator(logprobs_.begin()), std::make_move_iterator(logprobs_.end()));
  tokens_.clear();
  logprobs_.clear();
  return done_;
}

Status TokenStream::status() const {
  MutexLock l(&mu_);
  return status_;
}
std::string TokenStream::finish_reason() const {
  MutexLock l(&mu_);
  return reason_;
}
GenerateUsage TokenStream::usage() const {
  MutexLock l(&mu_);
  return usage_;
}

// ---- DecoderCore ---------------------------------------------------------------------------------

struct DecoderCore::Sequence final : LogitShaper {
  SequenceState state;
  DsparkState dspark;           // speculating: the same positions as `state`
  std::vector<int32_t> tokens;  // prompt + generated tokens so far
  int64_t prompt_len = 0;
  std::string session_id;
  UnitKey ns{};
  int unit_tokens = kDefaultUnitTokens;
  SamplingParams sampling;
  Rng rng{0};
  LogitProcessor processor;     // logit_bias and penalties; counts the reply's tokens
  // Constrained decoding: the reply's JSON so far, and the vocabulary's masks.
  std::optional<grammar::JsonMatcher> matcher;
  const grammar::TokenMasker* masker = nullptr;
  grammar::TokenBitmask mask;
  bool stuck = false;           // the grammar admitted no token (a bug: it never reaches such a state)
  int top_logprobs = -1;        // >= 0: every token's log-probabilities go with it, this many top ids
  uint32_t max_tokens = 0;
  std::vector<int32_t> stop_ids;
  int64_t generated = 0;
  std::shared_ptr<TokenStream> stream;
  GenerateUsage usage;

  bool shaping() const { return processor.active() || matcher.has_value(); }

  // The grammar's mask (refused tokens to -inf), then the penalties and the bias.
  void Shape(float* logits, int V) override {
    if (matcher) {
      masker->Fill(*matcher, &mask);
      constexpr float kRefused = -std::numeric_limits<float>::infinity();
      bool any = false;
      for (int w = 0; w * 64 < V; ++w) {
        const uint64_t bits = mask[static_cast<size_t>(w)];
        const int begin = w * 64, end = std::min(V, begin + 64);
        any |= bits != 0;
        if (bits == ~uint64_t{0}) continue;
        if (bits == 0) {
          std::fill(logits + begin, logits + end, kRefused);
          continue;
        }
        for (int i = begin; i < end; ++i)
          if (!((bits >> (i - begin)) & 1)) logits[i] = kRefused;
      }
      stuck |= !any;
    }
    processor.Apply(logits, V);
  }
  void Emitted(int32_t token) override {
    processor.Count(token);
    if (matcher) stuck |= !masker->Advance(&*matcher, token);
  }

  // The next token from `logits` [V] (shaped in place); `logprob` gets its log-probabilities when
  // the request asked.
  int32_t Sample(float* logits, int V, std::optional<TokenLogprob>* logprob) {
    Shape(logits, V);
    const int32_t t = SampleToken(logits, V, sampling, &rng);
    Emitted(t);
    if (top_logprobs >= 0) *logprob = LogprobsOf(logits, V, t, top_logprobs);
    return t;
  }
};

DecoderCore::DecoderCore(const Model& model, CacheClient* cache, PrefillCall prefill, DecoderOptions options,
                         NodeMetrics* metrics, const NodeExecutors& pools, SpeculationMetrics* spec_metrics)
    : model_(model),
      experts_(options.expert_cache_bytes > 0 ? std::make_unique<ExpertCache>(model.weights(), options.expert_cache_bytes)
                                              : nullptr),
      engine_(model, pools.compute),
      prefill_(std::move(prefill)),
      opt_(options),
      metrics_(metrics),
      spec_metrics_(spec_metrics),
      swa_pool_(options.swa_pool_bytes, options.swa_ttl_ms),
      sessions_(options.session_bytes, options.session_ttl_ms),
      loader_(model, cache, metrics),
      persister_(model, cache, metrics, pools.io),
      // Admissions hold a thread only while they compute (or read the store), never through the
      // encoder's prefill: the requests pool is sized by cores, whatever max_running is.
      admissions_(pools.requests) {
  engine_.set_expert_cache(experts_.get());
  if (options.speculative) StartSpeculation();
  loop_ = std::thread([this] { BatchLoop(); });
}

DecoderCore::~DecoderCore() {
  admissions_.Wait();  // admissions and prefill calls still out first: they hand sequences to the loop
  {
    MutexLock l(&mu_);
    stop_ = true;
  }
  cv_.NotifyAll();
  loop_.join();
}

void DecoderCore::StartSpeculation() {
  const ModelConfig& c = model_.config();
  if (!c.has_dspark()) {
    std::cerr << "decoder: --speculative ignored: the model has no DSpark layers\n";
    return;
  }
  for (int L : c.dspark_target_layer_ids) {
    if (L < c.ced_split) {  // decoder replay starts at the CED split: it could not start the DSpark state
      std::cerr << "decoder: --speculative ignored: DSpark reads layer " << L << ", an encoder layer\n";
      return;
    }
  }
  // The scheduler's cost curve on this machine, at batch sizes up to what may run at once.
  std::vector<int> batches;
  for (int b : {1, 8, 32})
    if (b == 1 || b <= opt_.max_running) batches.push_back(b);
  StatusOr<VerifyCostCurve> curve = opt_.verify_cost.has_value()
                                        ? StatusOr<VerifyCostCurve>(*opt_.verify_cost)
                                        : MeasureVerifyCost(engine_, model_, batches, c.dspark_block_size,
                                                            /*prompt=*/16, /*repeats=*/3);
  if (!curve.ok()) {
    std::cerr << "decoder: speculation off, measuring its cost failed: " << curve.status().ToString() << "\n";
    return;
  }
  std::cerr << "decoder: speculative decoding on, verify cost relative to a decode step:";
  for (size_t i = 0; i < curve->batches.size(); ++i) {
    std::cerr << " batch " << curve->batches[i] << " [";
    for (size_t k = 0; k < curve->verify[i].size(); ++k) std::cerr << (k ? " " : "") << curve->verify[i][k];
    std::cerr << "] draft " << curve->draft[i] << ";";
  }
  std::cerr << "\n";
  speculator_ = std::make_unique<Speculator>(&engine_, model_, std::move(*curve));
}

int64_t DecoderCore::running() const {
  MutexLock l(&mu_);
  return static_cast<int64_t>(running_.size()) + stepping_.load();
}

uint64_t DecoderCore::ResidentBytes() const {
  uint64_t n = swa_pool_.bytes() + sessions_.bytes() + (experts_ ? experts_->resident_bytes() : 0);
  MutexLock l(&mu_);
  for (const auto& s : running_) n += s->state.ByteSize() + s->dspark.ByteSize();
  return n;
}

void DecoderCore::UpdateResidency() {
  if (!metrics_) return;
  uint64_t running = 0;
  {
    MutexLock l(&mu_);
    for (const auto& s : running_) running += s->state.ByteSize();
    metrics_->running.Set(static_cast<double>(running_.size()));
  }
  metrics_->resident_sessions.Set(static_cast<double>(sessions_.bytes()));
  metrics_->resident_running.Set(static_cast<double>(running));
  metrics_->resident_swa.Set(static_cast<double>(swa_pool_.bytes()));
  metrics_->waiting.Set(static_cast<double>(waiting_.load()));
  if (experts_) {
    metrics_->resident_experts.Set(static_cast<double>(experts_->resident_bytes()));
    metrics_->expert_hits.Increment(static_cast<double>(experts_->hits()) - metrics_->expert_hits.Value());
    metrics_->expert_misses.Increment(static_cast<double>(experts_->misses()) - metrics_->expert_misses.Value());
  }
}

struct DecoderCore::Admission {
  GenerateInput in;
  std::shared_ptr<TokenStream> stream;
  std::chrono::steady_clock::time_point t0;
  // A migrated request (in.resumed > 0) holds the prompt [0, P) and then the R tokens its failed
  // attempt streamed; everything up to the first token concerns the prompt alone, as it did then.
  int64_t R = 0, P = 0;
  std::vector<int32_t> prompt_copy;  // a migrated request's prompt; an ordinary one's is in.tokens
  SamplingParams sampling;
  LogitAdjustments adjustments;
  std::unique_ptr<Sequence> seq;
  bool warm = false;
  PrefillInput prefill;

  const std::vector<int32_t>& prompt_ids() const { return R > 0 ? prompt_copy : in.tokens; }
};

std::shared_ptr<TokenStream> DecoderCore::Generate(GenerateInput in) {
  ScratchReleaser release_scratch;  // the replay's scratch, on the caller's thread
  auto stream = std::make_shared<TokenStream>();
  ++waiting_;
  StatusOr<std::unique_ptr<Admission>> a = AdmitBegin(std::move(in), stream);
  if (!a.ok()) {
    EndAdmission(a.status(), stream);
    return stream;
  }
  std::promise<StatusOr<PrefillOutput>> answered;
  std::future<StatusOr<PrefillOutput>> prefilled = answered.get_future();
  Admission& adm = **a;
  prefill_(adm.in.encoder, adm.prefill, adm.in.deadline, std::shared_ptr<CancelToken>(stream, stream->cancel_token()),
           [&answered](StatusOr<PrefillOutput> po) { answered.set_value(std::move(po)); });
  EndAdmission(AdmitEnd(adm, prefilled.get()), stream);
  return stream;
}

void DecoderCore::Start(GenerateInput in, std::shared_ptr<TokenStream> stream) {
  ++waiting_;
  admissions_.Schedule([this, in = std::move(in), stream = std::move(stream)]() mutable {
    StatusOr<std::unique_ptr<Admission>> a = AdmitBegin(std::move(in), stream);
    if (!a.ok()) return EndAdmission(a.status(), stream);
    // Shared: std::function wants a copyable callback. No thread waits for the encoder; its answer
    // comes back to the admission threads for the replay.
    std::shared_ptr<Admission> adm = std::move(*a);
    admissions_.Hold();
    prefill_(adm->in.encoder, adm->prefill, adm->in.deadline, std::shared_ptr<CancelToken>(stream, stream->cancel_token()),
             [this, adm](StatusOr<PrefillOutput> po) {
               admissions_.Schedule([this, adm, po = std::move(po)]() mutable {
                 ScratchReleaser release_scratch;  // the replay's scratch, on one of the admission threads
                 EndAdmission(AdmitEnd(*adm, std::move(po)), adm->stream);
               });
               admissions_.Release();
             });
  });
}

void DecoderCore::EndAdmission(const Status& s, const std::shared_ptr<TokenStream>& stream) {
  --waiting_;
  if (!s.ok()) {
    if (metrics_) metrics_->CountOutcome(s, stream->cancel_token()->reason());
    stream->Finish(s, "error", {});
  }
  UpdateResidency();
}

StatusOr<std::unique_ptr<DecoderCore::Admission>> DecoderCore::AdmitBegin(GenerateInput in,
                                                                            const std::shared_ptr<TokenStream>& stream) {
  if (stream->cancelled()) return CancelledError("cancelled before admission");
  const ModelConfig& c = model_.config();
  auto a = std::make_unique<Admission>();
  a->t0 = std::chrono::steady_clock::now();
  a->stream = stream;
  const int64_t N = static_cast<int64_t>(in.tokens.size());
  const int U = in.unit_tokens;
  DS41_RETURN_IF_ERROR(CheckGenerateInput(in, c));
  a->R = in.resumed;
  a->P = N - a->R;
  a->sampling = SamplingParams{in.sampling.temperature, in.sampling.top_p, in.sampling.seed};
  DS41_RETURN_IF_ERROR(a->sampling.Validate());
  a->adjustments = LogitAdjustments{in.sampling.frequency_penalty, in.sampling.presence_penalty, in.sampling.logit_bias};
  DS41_RETURN_IF_ERROR(a->adjustments.Validate(c.vocab_size));
  {
    MutexLock l(&mu_);
    if (static_cast<int64_t>(running_.size()) + waiting_.load() > opt_.max_running)
      return ResourceExhaustedError("decoder: " + std::to_string(opt_.max_running) + " sequences already running");
  }
  a->in = std::move(in);
  if (a->R > 0) a->prompt_copy.assign(a->in.tokens.begin(), a->in.tokens.begin() + a->P);
  const std::vector<int32_t>& prompt_ids = a->prompt_ids();
  a->seq = std::make_unique<Sequence>();
  Sequence* seq = a->seq.get();
  seq->state = SequenceState::Create(c);
  // Prefix global KV up to the unit boundary below H: the session's warm state when it covers it,
  // else the cache (the encoder returns everything from that boundary on).
  int64_t H = a->in.cached_tokens;
  const int64_t boundary = H / U * U;
  if (!a->in.session_id.empty()) {
    if (std::optional<WarmSession> w = sessions_.Take(a->in.session_id, a->in.ns, prompt_ids, boundary)) {
      seq->state = std::move(w->state);
      a->warm = true;
    }
  }
  seq->usage.prefix_source = a->warm ? "warm" : (boundary > 0 ? "cache" : "none");
  if (!a->warm && boundary > 0) {
    const int64_t reach = loader_.Load(a->in.ns, prompt_ids, boundary, U, &seq->state);
    if (reach < boundary) H = reach;  // lost units: ask the encoder for less
  }
  a->prefill = PrefillInput{a->in.ns, prompt_ids, H, a->in.swa_peer, U, a->in.images};
  return a;
}

Status DecoderCore::AdmitEnd(Admission& a, StatusOr<PrefillOutput> prefilled) {
  const ModelConfig& c = model_.config();
  const GenerateInput& in = a.in;
  const std::shared_ptr<TokenStream>& stream = a.stream;
  const auto t0 = a.t0;
  const int64_t N = static_cast<int64_t>(in.tokens.size());
  const int U = in.unit_tokens;
  const int64_t R = a.R, P = a.P;
  const SamplingParams& sampling = a.sampling;
  const std::vector<int32_t>& prompt_ids = a.prompt_ids();
  const bool warm = a.warm;
  std::unique_ptr<Sequence>& seq = a.seq;
  DS41_ASSIGN_OR_RETURN(PrefillOutput po, std::move(prefilled));
  if (stream->cancelled()) return CancelledError("cancelled before the first token");
  DS41_ASSIGN_OR_RETURN(UnitLayout layout, UnitLayout::FromConfig(c, U));
  std::vector<Unit> units;
  for (const std::string& bytes : po.units) {
    auto u = DecodeUnit(layout, bytes);
    if (!u.ok()) return u.status().Prefixed("encoder unit");
    units.push_back(std::move(*u));
  }
  DS41_RETURN_IF_ERROR(ApplyUnits(layout, units, &seq->state));
  DS41_RETURN_IF_ERROR(seq->state.RestoreSwa(po.swa, c));
  DS41_ASSIGN_OR_RETURN(EncoderHandoff handoff, ParseHandoff(po.handoff, c));
  if (handoff.n != P) return InternalError("encoder handed off the wrong prompt length");
  const int64_t s = std::max(DefaultReplayStart(c, P), handoff.stream_start);
  const auto tr = std::chrono::steady_clock::now();
  std::vector<float> logits;
  // The replay computes [s, P): only images there go through the tower (the encoder's rows stay there).
  EnginePrompt engine_prompt(engine_, c, prompt_ids, in.images);
  DS41_ASSIGN_OR_RETURN(const TokenSpan prompt, engine_prompt.From(s));
  if (metrics_ && engine_prompt.images_encoded() > 0) metrics_->images_encoded.Increment(engine_prompt.images_encoded());
  // Speculating: the replayed rows (and the resumed ones) start the DSpark state, which needs no
  // more than the last window positions.
  std::vector<float> hidden;
  std::vector<float>* capture = speculating() ? &hidden : nullptr;
  DS41_RETURN_IF_ERROR(engine_.DecoderReplay(&seq->state, prompt, handoff, s, &logits, false, capture));
  if (capture) {
    seq->dspark = DsparkState::Create(c);
    DS41_RETURN_IF_ERROR(engine_.DsparkAppend(&seq->dspark, s, hidden));
  }
  Rng rng(sampling.seed);
  seq->processor = LogitProcessor(a.adjustments);
  if (in.sampling.response_json || !in.sampling.tool_calls.empty()) {
    if (opt_.masker == nullptr) {
      return FailedPreconditionError("decoder: constrained decoding needs the model's tokenizer, which this decoder lacks");
    }
    DS41_ASSIGN_OR_RETURN(std::shared_ptr<const grammar::Grammar> g,
                          in.sampling.response_json ? grammars_.Get(in.sampling.response_schema, in.sampling.response_after_reasoning)
                                                    : grammars_.GetToolCalls(in.sampling.tool_calls));
    seq->matcher.emplace(std::move(g));
    seq->masker = opt_.masker;
  }
  if (R > 0) {
    // The resumed tokens are the reply's own: the penalties count them and the grammar reads them
    // as the failed attempt did.
    for (int64_t i = P; i < N; ++i) seq->Emitted(in.tokens[static_cast<size_t>(i)]);
    if (seq->stuck) return InvalidArgumentError("generate: the resumed tokens do not follow the response format");
    DS41_RETURN_IF_ERROR(Resume(in, P, sampling, seq->shaping(), &seq->state, &logits, &rng, capture));
    if (capture) DS41_RETURN_IF_ERROR(engine_.DsparkAppend(&seq->dspark, P, hidden));
    if (metrics_) metrics_->computed_tokens.Add({{"kind", "resumed"}}).Increment(static_cast<double>(R));
  }

  seq->tokens = in.tokens;
  seq->prompt_len = P;
  seq->session_id = in.session_id;
  seq->ns = in.ns;
  seq->unit_tokens = U;
  seq->sampling = sampling;
  seq->rng = rng;
  seq->top_logprobs = in.sampling.logprobs ? in.sampling.top_logprobs : -1;
  seq->max_tokens = in.sampling.max_tokens;
  seq->stop_ids = in.sampling.stop_ids;
  seq->stream = stream;
  GenerateUsage& u = seq->usage;
  u.prompt_tokens = P;
  u.cached_tokens = po.cached_tokens;
  u.computed_tokens = po.computed_tokens;
  u.encoder_replay_tokens = po.replay_tokens;
  u.decoder_replay_tokens = P - s;
  u.swa_source = po.swa_source;
  std::optional<TokenLogprob> first_logprob;
  const int32_t first = seq->Sample(logits.data(), c.vocab_size, &first_logprob);
  if (seq->stuck) return InternalError("decoder: the response format admitted no token");
  u.ttft_seconds = SecondsSince(t0);
  seq->generated = 1;
  seq->tokens.push_back(first);
  stream->Push(first, first_logprob ? &*first_logprob : nullptr);
  if (metrics_) {
    metrics_->prefill_seconds.Observe(SecondsSince(tr));
    metrics_->ttft_seconds.Observe(u.ttft_seconds);
    metrics_->computed_replay.Increment(static_cast<double>(P - s));
    metrics_->cached_tokens.Increment(static_cast<double>(po.cached_tokens));
    metrics_->generated_tokens.Increment();
    if (warm) metrics_->swa_warm.Increment();
  }
  const bool stop = std::find(seq->stop_ids.begin(), seq->stop_ids.end(), first) != seq->stop_ids.end();
  if (stop || seq->generated >= static_cast<int64_t>(seq->max_tokens)) {
    Finish(std::move(seq), stop ? "stop" : "length");
    return Status::Ok();
  }
  {
    MutexLock l(&mu_);
    running_.push_back(std::move(seq));
  }
  cv_.NotifyAll();
  return Status::Ok();
}

Status DecoderCore::Resume(const GenerateInput& in, int64_t P, const SamplingParams& sampling, bool shaped,
                           SequenceState* state, std::vector<float>* logits, Rng* rng,
                           std::vector<float>* dspark_hidden) {
  const int V = model_.config().vocab_size;
  // The replay's logits chose the first resumed token on the failed decoder. With greedy sampling
  // (and nothing shaping them: a grammar or bias would have to be applied first) they must choose
  // it again here: a different choice means the two runs' prefills differed (a
  // lost prefix unit or SWA state at H, rebuilt by a bounded replay), and the continuation may then
  // differ from an uninterrupted run's. Worth a line; the request goes on.
  if (sampling.temperature == 0.0f && !shaped && Argmax(logits->data(), V) != in.tokens[static_cast<size_t>(P)]) {
    std::cerr << "decoder: migrated request " << in.request_id << ": the replay's greedy token differs from the one "
              << "streamed by the failed attempt; its continuation may differ from an uninterrupted run\n";
  }
  // The resumed tokens through all layers, appended to the replayed prompt: what the failed
  // decoder's decode steps computed, to the bit (the exact path over R rows gives the same bits as R
  // one-row steps: docs/numerics.md). A fresh CED prefill of prompt + resumed tokens would instead
  // replay the decoder layers from a later start and, past the window, differ (MODEL.md §10.4).
  const TokenSpan resumed{std::vector<int32_t>(in.tokens.begin() + P, in.tokens.end()), {}, {}};
  DS41_RETURN_IF_ERROR(engine_.Prefill(state, resumed, /*all_logits=*/false, logits, dspark_hidden));
  // The failed attempt drew once per sampled token (SampleToken): continue after its draws.
  if (sampling.temperature > 0.0f) {
    for (size_t i = 0; i < resumed.tokens.size(); ++i) rng->Next();
  }
  return Status::Ok();
}

void DecoderCore::BatchLoop() {
  for (;;) {
    std::vector<std::unique_ptr<Sequence>> batch;
    {
      MutexLock l(&mu_);
      cv_.Wait(&mu_, [this]() DS41_REQUIRES(mu_) { return stop_ || !running_.empty(); });
      if (stop_) {
        for (auto& s : running_) s->stream->Finish(UnavailableError("decoder shutting down"), "error", s->usage);
        running_.clear();
        return;
      }
      batch.swap(running_);  // sequences admitted during this step join the next one
      stepping_ = static_cast<int64_t>(batch.size());
    }
    std::vector<std::unique_ptr<Sequence>> live;
    for (auto& s : batch) {
      if (s->stream->cancelled()) {
        if (metrics_) metrics_->CountCancelled(s->stream->cancel_token()->reason());
        s->stream->Finish(CancelledError("cancelled"), "cancelled", s->usage);  // frees the sequence
      } else {
        live.push_back(std::move(s));
      }
    }
    if (live.empty()) {
      stepping_ = 0;
      UpdateResidency();
      continue;
    }
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<GeneratedTokens> emitted;
    const Status st = DecodeStep(live, &emitted);
    if (metrics_) metrics_->decode_step_seconds.Observe(SecondsSince(t0));
    std::vector<std::unique_ptr<Sequence>> keep;
    for (size_t i = 0; i < live.size(); ++i) {
      auto& s = live[i];
      if (!st.ok()) {
        if (metrics_) metrics_->requests_error.Increment();
        s->stream->Finish(st, "error", s->usage);
        continue;
      }
      if (s->stuck) {
        if (metrics_) metrics_->requests_error.Increment();
        s->stream->Finish(InternalError("decoder: the response format admitted no token"), "error", s->usage);
        continue;
      }
      // A step emits at most up to the budget and ends at a stop id (the speculator cuts there).
      const GeneratedTokens& e = emitted[i];
      for (size_t t = 0; t < e.ids.size(); ++t) {
        s->tokens.push_back(e.ids[t]);
        ++s->generated;
        s->stream->Push(e.ids[t], e.logprobs.empty() ? nullptr : &e.logprobs[t]);
      }
      if (metrics_) metrics_->generated_tokens.Increment(static_cast<double>(e.ids.size()));
      const bool stop = std::find(s->stop_ids.begin(), s->stop_ids.end(), s->tokens.back()) != s->stop_ids.end();
      if (stop || s->generated >= static_cast<int64_t>(s->max_tokens)) {
        Finish(std::move(s), stop ? "stop" : "length");
      } else {
        keep.push_back(std::move(s));
      }
    }
    {
      MutexLock l(&mu_);
      for (auto& s : keep) running_.push_back(std::move(s));
      stepping_ = 0;
    }
    UpdateResidency();
  }
}

Status DecoderCore::DecodeStep(const std::vector<std::unique_ptr<Sequence>>& live,
                               std::vector<GeneratedTokens>* emitted) {
  const int V = model_.config().vocab_size;
  emitted->assign(live.size(), {});
  if (speculator_ == nullptr) {
    std::vector<SequenceState*> states;
    std::vector<int32_t> next;
    for (const auto& s : live) {
      states.push_back(&s->state);
      next.push_back(s->tokens.back());
    }
    std::vector<float> logits;
    DS41_RETURN_IF_ERROR(engine_.DecodeBatch(states, next, &logits));
    if (metrics_) metrics_->batch_tokens.Observe(static_cast<double>(live.size()));
    for (size_t i = 0; i < live.size(); ++i) {
      std::optional<TokenLogprob> lp;
      (*emitted)[i].ids = {live[i]->Sample(&logits[i * static_cast<size_t>(V)], V, &lp)};
      if (lp) (*emitted)[i].logprobs.push_back(std::move(*lp));
    }
    return Status::Ok();
  }
  std::vector<SpecSequence> seqs;
  for (const auto& s : live)
    seqs.push_back({&s->state, &s->dspark, s->tokens.back(), s->sampling, &s->rng,
                    static_cast<int>(std::min<int64_t>(static_cast<int64_t>(s->max_tokens) - s->generated,
                                                     std::numeric_limits<int>::max())),
                    s->stop_ids, s->shaping() ? s.get() : nullptr, s->top_logprobs});
  std::vector<SpecOutcome> out;
  int k = 0;
  DS41_RETURN_IF_ERROR(speculator_->Step(&seqs, &out, &k));
  int64_t rows = 0;
  for (size_t i = 0; i < live.size(); ++i) {
    (*emitted)[i] = {std::move(out[i].tokens), std::move(out[i].logprobs)};
    rows += 1 + out[i].verified;
    if (spec_metrics_) spec_metrics_->CountStep(out[i].verified, out[i].accepted);
  }
  if (spec_metrics_) {
    spec_metrics_->verify_length.Observe(k);
    (speculator_->last_step_drafted() ? spec_metrics_->drafted_steps : spec_metrics_->plain_steps).Increment();
  }
  if (metrics_) metrics_->batch_tokens.Observe(static_cast<double>(rows));
  return Status::Ok();
}

void DecoderCore::Finish(std::unique_ptr<Sequence> seq, const std::string& reason) {
  const ModelConfig& c = model_.config();
  GenerateUsage usage = seq->usage;
  usage.completion_tokens = seq->generated;
  const int64_t C = seq->state.length;  // the last sampled token was not fed
  std::vector<int32_t> ctx(seq->tokens.begin(), seq->tokens.begin() + C);
  // The generated units go to the cache, so the next turn hits the whole context.
  std::vector<BuiltUnit> units;
  if (persister_.has_store()) {
    const int64_t from = seq->prompt_len / seq->unit_tokens * seq->unit_tokens;
    auto built = persister_.Build(seq->ns, seq->state, ctx, from, C, seq->unit_tokens);
    if (built.ok()) units = std::move(*built);
  }
  swa_pool_.Put(SwaPoolKey(seq->ns, PrefixKey(seq->ns, ctx, C, seq->unit_tokens)), seq->state.SerializeSwa(c));
  if (!seq->session_id.empty()) sessions_.Put(seq->session_id, WarmSession{std::move(seq->state), std::move(ctx), seq->ns});
  if (metrics_) metrics_->requests_ok.Increment();
  // The stream ends only once the store has the units (read-your-writes: a client's next turn,
  // sent the moment this one ends, hits all of it). Off the step loop: the batch goes on meanwhile.
  persister_.Put(seq->ns, std::move(units), [stream = seq->stream, reason, usage] { stream->Finish(Status::Ok(), reason, usage); });
}

}  // namespace ds41
