// The node protocol's messages (proto/node.proto) to and from node_messages.h, for both sides of a
// call: the client encodes a request and decodes the answer; the serving role decodes the request
// with every check the protocol makes (model fingerprint and version, namespace, bounded sizes) and
// encodes its answer. One place knows each field. Thread-safe: pure functions.
#pragma once

#include <string>

#include "engine/config/config.h"
#include "node.pb.h"
#include "node_client/node_messages.h"
#include "util/status.h"

namespace ds41 {

inline constexpr size_t kMaxStopTokens = 1024;
inline constexpr size_t kMaxLogitBias = 1024;
inline constexpr int kMaxTopLogprobs = 20;
inline constexpr size_t kMaxResponseSchemaBytes = 256 * 1024;
inline constexpr size_t kMaxPromptImages = 64;
inline constexpr size_t kMaxSessionIdBytes = 256;  // longer session ids are cut to this

void EncodePrefillRequest(const PrefillInput& in, const std::string& fingerprint, ds41::node::v1::PrefillRequest* req);
Status DecodePrefillRequest(const ds41::node::v1::PrefillRequest& req, const std::string& fingerprint, PrefillInput* in);
void EncodePrefillResponse(PrefillOutput out, ds41::node::v1::PrefillResponse* resp);
PrefillOutput DecodePrefillResponse(ds41::node::v1::PrefillResponse* resp);  // moves the bytes out

// The deadline does not travel in the message (it is the call's); Decode leaves in->deadline alone.
void EncodeGenerateRequest(const GenerateInput& in, const std::string& fingerprint, ds41::node::v1::GenerateRequest* req);
Status DecodeGenerateRequest(const ds41::node::v1::GenerateRequest& req, const std::string& fingerprint, GenerateInput* in);
// A Generate response's tokens (and their log-probabilities). Decode refuses log-probabilities that
// are not one per token with equally long top lists (INVALID_ARGUMENT).
void EncodeGenerated(const GeneratedTokens& t, ds41::node::v1::GenerateResponse* out);
StatusOr<GeneratedTokens> DecodeGenerated(const ds41::node::v1::GenerateResponse& msg);
void EncodeUsage(const GenerateUsage& u, ds41::node::v1::Usage* out);
GenerateUsage DecodeUsage(const ds41::node::v1::Usage& u);

// What a serving node checks in a decoded request, against its model, before any work: a prompt
// of ids inside the vocabulary but for image spans that hold their key tokens (PromptImage),
// cached_tokens in [0, N), a unit size the model's unit layout
// accepts; for Generate also max_tokens >= 1 and an encoder named (the sampling ranges are the
// engine's SamplingParams::Validate, which the decoder runs after this). INVALID_ARGUMENT naming
// the field. Kept here, beside the decoding, so the fuzz harness runs the nodes' own checks.
Status CheckPrefillInput(const PrefillInput& in, const ModelConfig& model);
Status CheckGenerateInput(const GenerateInput& in, const ModelConfig& model);

void EncodeSwaStateRequest(const UnitKey& ns, const UnitKey& prefix_key, int64_t position, const std::string& fingerprint,
                           ds41::node::v1::SwaStateRequest* req);
Status DecodeSwaStateRequest(const ds41::node::v1::SwaStateRequest& req, const std::string& fingerprint, UnitKey* ns,
                             UnitKey* prefix_key);

void EncodeNodeStatus(const NodeStatusReport& r, ds41::node::v1::NodeStatus* out);
NodeStatusReport DecodeNodeStatus(const ds41::node::v1::NodeStatus& s);

}  // namespace ds41
