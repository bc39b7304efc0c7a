// What callers and the node roles exchange, free of transport: a prefill on an encoder, a generation
// on a decoder, a node's status. node_codec.h turns them into the node protocol's messages
// (proto/node.proto) and back; node_client.h carries them over gRPC. Plain values
// (thread-compatible).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "unit/unit_key.h"
#include "util/token_logprob.h"

namespace ds41 {

enum class NodeRole { kEncoder, kDecoder };
const char* NodeRoleName(NodeRole r);  // "encoder" | "decoder"

// One image of a prompt: its span starts at `start` (the span's positions carry ImageKeyToken(hash,
// offset) in the prompt's tokens, unit/unit_key.h) and its pixels are the picture already fitted
// to the plan (image/image_patches.h FitToPlan): n_vit_h * patch rows of n_vit_w * patch RGB8 pixels.
struct PromptImage {
  int64_t start = 0;
  int n_vit_h = 0, n_vit_w = 0;
  std::array<uint8_t, 32> hash{};
  std::string pixels;
};

struct PrefillInput {
  UnitKey ns{};                    // cache namespace root (tenant)
  std::vector<int32_t> tokens;     // the prompt [0, N)
  int64_t cached_tokens = 0;       // H
  std::string swa_peer;            // who may hold the SWA state at H
  int unit_tokens = kDefaultUnitTokens;
  std::vector<PromptImage> images;  // in prompt order
};

struct PrefillOutput {
  std::vector<std::string> units;  // encoded units from the unit boundary below H to N: full units, then a tail
  std::string swa;                 // SWA state at N
  std::string handoff;             // SerializeHandoff
  int64_t cached_tokens = 0;       // H used (lower than asked when the cache lost units)
  int64_t computed_tokens = 0;
  int64_t replay_tokens = 0;
  std::string swa_source;          // none | local | peer | replay
};

struct GenerateSampling {
  float temperature = 0.0f;        // 0: greedy
  float top_p = 1.0f;
  uint64_t seed = 0;
  uint32_t max_tokens = 16;
  std::vector<int32_t> stop_ids;
  // OpenAI's logit adjustments (engine/sampling.h LogitAdjustments has their definition).
  float frequency_penalty = 0.0f, presence_penalty = 0.0f;
  std::vector<std::pair<int32_t, float>> logit_bias;
  bool logprobs = false;           // send a TokenLogprob with every generated token
  int top_logprobs = 0;            // with this many most likely ids (0..kMaxTopLogprobs)
  // Constrained decoding: the reply is one JSON document (grammar/json_grammar.h), of the JSON
  // Schema `response_schema` (JSON text) or, when that is empty, any JSON object.
  bool response_json = false;
  std::string response_schema;
  bool response_after_reasoning = false;  // with response_json: free reasoning up to "</think>" first
  // Or: the reply is a DSML tool-call block of these tools (grammar/tool_call_grammar.h spec text).
  std::string tool_calls;
};

// Newly generated ids, and their log-probabilities when the request asked (else empty): under the
// logits the sampler started from, after logit_bias and penalties, at temperature 1, before top_p.
struct GeneratedTokens {
  std::vector<int32_t> ids;
  std::vector<TokenLogprob> logprobs;  // empty, or one per id
};

struct GenerateInput {
  std::string request_id, session_id;
  UnitKey ns{};
  std::vector<int32_t> tokens;      // prompt [0, N)
  std::vector<PromptImage> images;  // in prompt order, inside the prompt (not the resumed tokens)
  int64_t cached_tokens = 0;        // H from the router
  std::string encoder;              // encoder address
  std::string swa_peer;             // who may hold the SWA state at H
  GenerateSampling sampling;
  int unit_tokens = kDefaultUnitTokens;
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::now() + std::chrono::seconds(600);
  // Request migration (proto/node.proto GenerateRequest.resumed_tokens): the last `resumed` of
  // `tokens` were generated and streamed by an earlier attempt; the prompt is the rest. The decoder
  // recomputes them without sending them again and continues exactly where that attempt stopped;
  // sampling.max_tokens counts new tokens only. REQUIRES: 0 <= resumed < tokens.size().
  int64_t resumed = 0;
};

// prompt_tokens: the prompt without resumed tokens; completion_tokens: the tokens this call sent.
struct GenerateUsage {
  int64_t prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0, computed_tokens = 0;
  int64_t encoder_replay_tokens = 0, decoder_replay_tokens = 0;
  std::string prefix_source, swa_source;
  double ttft_seconds = 0;
};

struct GenerateEnd {
  std::string finish_reason;        // stop | length | cancelled
  GenerateUsage usage;
};

struct NodeStatusReport {
  std::string fingerprint;
  std::string role;                 // as the node reports it
  int64_t running = 0, waiting = 0, queued_tokens = 0;
  uint64_t resident_bytes = 0;
  std::vector<std::pair<std::string, int64_t>> warm_sessions;  // session, context length held (-1 unknown)
};

}  // namespace ds41
