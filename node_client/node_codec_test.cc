#include "node_client/node_codec.h"

#include <gtest/gtest.h>

#include "engine/config/presets.h"
#include "node_client/node_protocol.h"

namespace ds41 {
namespace {

namespace pb = ds41::node::v1;
const std::string kFp(64, 'a');

UnitKey Key(uint8_t b) {
  UnitKey k{};
  k.fill(b);
  return k;
}

TEST(NodeCodecTest, PrefillRequestRoundTrips) {
  PrefillInput in{Key(7), {1, 2, 3, 4}, 2, "10.0.0.1:7500", 64, {}};
  pb::PrefillRequest req;
  EncodePrefillRequest(in, kFp, &req);
  PrefillInput out;
  ASSERT_TRUE(DecodePrefillRequest(req, kFp, &out).ok());
  EXPECT_EQ(out.ns, in.ns);
  EXPECT_EQ(out.tokens, in.tokens);
  EXPECT_EQ(out.cached_tokens, 2);
  EXPECT_EQ(out.swa_peer, in.swa_peer);
  EXPECT_EQ(out.unit_tokens, 64);
}

// A prompt with an image: its span's positions hold the image's key tokens, which travel with its
// pixels and are checked against the model's vision geometry.
TEST(NodeCodecTest, PromptImagesRoundTripAndAreChecked) {
  ModelConfig c = TinyVisionConfig();
  const int r = c.vision_downsample_ratio, p = c.vision_patch_size;
  PromptImage im;
  im.start = 2;
  im.n_vit_h = r + 1;  // 2 x 1 aligner rows: 2 * (1 + 1) + 2 = 6 positions
  im.n_vit_w = r;
  im.hash.fill(0x5a);
  im.pixels.assign(static_cast<size_t>(im.n_vit_h) * p * im.n_vit_w * p * 3, '\x7f');
  PrefillInput in{Key(7), {1, 2}, 0, "", 64, {im}};
  for (int j = 0; j < 6; ++j) in.tokens.push_back(ImageKeyToken(im.hash, j));
  in.tokens.push_back(9);
  pb::PrefillRequest req;
  EncodePrefillRequest(in, kFp, &req);
  PrefillInput out;
  ASSERT_TRUE(DecodePrefillRequest(req, kFp, &out).ok());
  ASSERT_EQ(out.images.size(), 1u);
  EXPECT_EQ(out.images[0].start, 2);
  EXPECT_EQ(out.images[0].hash, im.hash);
  EXPECT_EQ(out.images[0].pixels, im.pixels);
  EXPECT_EQ(out.tokens, in.tokens);
  EXPECT_TRUE(CheckPrefillInput(out, c).ok()) << CheckPrefillInput(out, c).ToString();
  // Two pictures never share a key token at an offset (they would share cache units otherwise).
  std::array<uint8_t, 32> other = im.hash;
  other[0] ^= 1;
  EXPECT_NE(ImageKeyToken(other, 0), ImageKeyToken(im.hash, 0));
  EXPECT_LT(ImageKeyToken(im.hash, 0), 0);

  auto refused = [&](PrefillInput bad, const char* why) {
    const Status s = CheckPrefillInput(bad, c);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << why;
  };
  PrefillInput bad = out;
  bad.tokens[4] = 509;  // the image token itself, not the key token
  refused(bad, "a span position without its key token");
  bad = out;
  bad.images[0].start = 3;
  refused(bad, "a span that does not start where its key tokens do");
  bad = out;
  bad.images[0].pixels.pop_back();
  refused(bad, "pixels of the wrong size");
  bad = out;
  bad.images.clear();
  refused(bad, "key tokens without their image");
  bad = out;
  bad.tokens.resize(6);
  refused(bad, "a span past the prompt");
  bad = out;
  bad.images.push_back(bad.images[0]);
  refused(bad, "a second image inside the first's span");
  bad = out;
  bad.images[0].n_vit_h = 4000;
  refused(bad, "a grid over the span cap");
  EXPECT_EQ(CheckPrefillInput(out, TinyConfig()).code(), StatusCode::kInvalidArgument) << "a model without vision";
  GenerateInput g;
  g.tokens = out.tokens;
  g.images = out.images;
  g.encoder = "e:1";
  g.unit_tokens = 64;
  EXPECT_TRUE(CheckGenerateInput(g, c).ok());
  g.resumed = 2;  // the last two tokens were generated: the span would reach into them
  EXPECT_EQ(CheckGenerateInput(g, c).code(), StatusCode::kInvalidArgument);
}

TEST(NodeCodecTest, RequestsForAnotherModelOrProtocolAreRefused) {
  PrefillInput in{Key(7), {1}, 0, "", 64, {}};
  pb::PrefillRequest req;
  EncodePrefillRequest(in, kFp, &req);
  PrefillInput out;
  EXPECT_EQ(DecodePrefillRequest(req, std::string(64, 'b'), &out).code(), StatusCode::kFailedPrecondition);
  req.mutable_model()->set_protocol_version(kNodeProtocolVersion + 1);
  EXPECT_EQ(DecodePrefillRequest(req, kFp, &out).code(), StatusCode::kFailedPrecondition);
  EncodePrefillRequest(in, kFp, &req);
  req.mutable_ns()->set_id("short");
  EXPECT_EQ(DecodePrefillRequest(req, kFp, &out).code(), StatusCode::kInvalidArgument);
}

TEST(NodeCodecTest, GenerateRequestRoundTripsAndFillsDefaults) {
  GenerateInput in;
  in.request_id = "r1";
  in.session_id = std::string(300, 's');
  in.ns = Key(3);
  in.tokens = {5, 6, 7};
  in.cached_tokens = 1;
  in.encoder = "e:1";
  in.swa_peer = "d:2";
  in.sampling.temperature = 0.7f;
  in.sampling.top_p = 0.9f;
  in.sampling.seed = 42;
  in.sampling.max_tokens = 33;
  in.sampling.stop_ids = {0, 9};
  in.unit_tokens = 32;
  in.resumed = 2;
  pb::GenerateRequest req;
  EncodeGenerateRequest(in, kFp, &req);
  GenerateInput out;
  ASSERT_TRUE(DecodeGenerateRequest(req, kFp, &out).ok());
  EXPECT_EQ(out.resumed, 2);
  EXPECT_EQ(out.session_id, std::string(kMaxSessionIdBytes, 's'));
  EXPECT_EQ(out.tokens, in.tokens);
  EXPECT_EQ(out.encoder, "e:1");
  EXPECT_EQ(out.swa_peer, "d:2");
  EXPECT_FLOAT_EQ(out.sampling.temperature, 0.7f);
  EXPECT_FLOAT_EQ(out.sampling.top_p, 0.9f);
  EXPECT_EQ(out.sampling.seed, 42u);
  EXPECT_EQ(out.sampling.max_tokens, 33u);
  EXPECT_EQ(out.sampling.stop_ids, (std::vector<int32_t>{0, 9}));
  EXPECT_EQ(out.unit_tokens, 32);

  // Fields proto3 leaves at zero mean "not set".
  req.mutable_sampling()->set_top_p(0);
  req.mutable_sampling()->set_max_tokens(0);
  req.set_unit_tokens(0);
  ASSERT_TRUE(DecodeGenerateRequest(req, kFp, &out).ok());
  EXPECT_FLOAT_EQ(out.sampling.top_p, 1.0f);
  EXPECT_EQ(out.sampling.max_tokens, 16u);
  EXPECT_EQ(out.unit_tokens, kDefaultUnitTokens);

  // A migrated request's resumed tokens leave at least one prompt token.
  req.set_resumed_tokens(3);
  EXPECT_EQ(DecodeGenerateRequest(req, kFp, &out).code(), StatusCode::kInvalidArgument);
  req.set_resumed_tokens(-1);
  EXPECT_EQ(DecodeGenerateRequest(req, kFp, &out).code(), StatusCode::kInvalidArgument);
  req.set_resumed_tokens(0);
  ASSERT_TRUE(DecodeGenerateRequest(req, kFp, &out).ok());
  EXPECT_EQ(out.resumed, 0);

  for (size_t i = 0; i <= kMaxStopTokens; ++i) req.mutable_sampling()->add_stop_token_ids(1);
  EXPECT_EQ(DecodeGenerateRequest(req, kFp, &out).code(), StatusCode::kInvalidArgument);
}

TEST(NodeCodecTest, LogitAdjustmentsAndLogprobRequestsRoundTripWithinBounds) {
  GenerateInput in;
  in.ns = Key(3);
  in.tokens = {5, 6, 7};
  in.encoder = "e:1";
  in.sampling.frequency_penalty = 1.25f;
  in.sampling.presence_penalty = -0.5f;
  in.sampling.logit_bias = {{7, -100.0f}, {2, 3.5f}};
  in.sampling.logprobs = true;
  in.sampling.top_logprobs = 4;
  in.sampling.response_json = true;
  in.sampling.response_schema = R"({"type":"boolean"})";
  pb::GenerateRequest req;
  EncodeGenerateRequest(in, kFp, &req);
  GenerateInput out;
  ASSERT_TRUE(DecodeGenerateRequest(req, kFp, &out).ok());
  EXPECT_FLOAT_EQ(out.sampling.frequency_penalty, 1.25f);
  EXPECT_FLOAT_EQ(out.sampling.presence_penalty, -0.5f);
  EXPECT_EQ(out.sampling.logit_bias, in.sampling.logit_bias);
  EXPECT_TRUE(out.sampling.logprobs);
  EXPECT_EQ(out.sampling.top_logprobs, 4);
  EXPECT_TRUE(out.sampling.response_json);
  EXPECT_EQ(out.sampling.response_schema, R"({"type":"boolean"})");
  req.mutable_sampling()->set_response_json(false);
  EXPECT_EQ(DecodeGenerateRequest(req, kFp, &out).code(), StatusCode::kInvalidArgument);
  req.mutable_sampling()->set_response_json(true);
  req.mutable_sampling()->set_response_schema(std::string(kMaxResponseSchemaBytes + 1, ' '));
  EXPECT_EQ(DecodeGenerateRequest(req, kFp, &out).code(), StatusCode::kInvalidArgument);
  req.mutable_sampling()->clear_response_schema();
  req.mutable_sampling()->set_tool_call_spec(R"({"tools": []})");
  EXPECT_EQ(DecodeGenerateRequest(req, kFp, &out).code(), StatusCode::kInvalidArgument);  // not both
  req.mutable_sampling()->set_response_json(false);
  ASSERT_TRUE(DecodeGenerateRequest(req, kFp, &out).ok());
  EXPECT_EQ(out.sampling.tool_calls, R"({"tools": []})");

  req.mutable_sampling()->set_top_logprobs(kMaxTopLogprobs + 1);
  EXPECT_EQ(DecodeGenerateRequest(req, kFp, &out).code(), StatusCode::kInvalidArgument);
  req.mutable_sampling()->set_top_logprobs(-1);
  EXPECT_EQ(DecodeGenerateRequest(req, kFp, &out).code(), StatusCode::kInvalidArgument);
  req.mutable_sampling()->set_top_logprobs(0);
  for (size_t i = 0; i <= kMaxLogitBias; ++i) req.mutable_sampling()->add_logit_bias()->set_token(1);
  EXPECT_EQ(DecodeGenerateRequest(req, kFp, &out).code(), StatusCode::kInvalidArgument);
}

TEST(NodeCodecTest, GeneratedTokensRoundTripAndMismatchedLogprobsAreRefused) {
  GeneratedTokens t;
  t.ids = {4, 9};
  t.logprobs = {{-0.5f, {{4, -0.5f}, {1, -1.5f}}}, {-2.0f, {{3, -0.25f}, {9, -2.0f}}}};
  pb::GenerateResponse msg;
  EncodeGenerated(t, &msg);
  StatusOr<GeneratedTokens> back = DecodeGenerated(msg);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->ids, t.ids);
  ASSERT_EQ(back->logprobs.size(), 2u);
  EXPECT_FLOAT_EQ(back->logprobs[1].logprob, -2.0f);
  EXPECT_EQ(back->logprobs[1].top, t.logprobs[1].top);

  // Without log-probabilities: ids alone.
  pb::GenerateResponse plain;
  EncodeGenerated({{4, 9}, {}}, &plain);
  ASSERT_TRUE(DecodeGenerated(plain).ok());
  EXPECT_TRUE(DecodeGenerated(plain)->logprobs.empty());

  pb::GenerateResponse short_lp = msg;
  short_lp.mutable_logprobs()->RemoveLast();
  EXPECT_EQ(DecodeGenerated(short_lp).status().code(), StatusCode::kInvalidArgument);
  pb::GenerateResponse ragged = msg;
  ragged.mutable_logprobs(0)->add_top_ids(5);
  EXPECT_EQ(DecodeGenerated(ragged).status().code(), StatusCode::kInvalidArgument);
}

TEST(NodeCodecTest, UsageAndStatusRoundTrip) {
  GenerateUsage u{10, 4, 6, 4, 1, 2, "cache", "peer", 0.25};
  pb::Usage pu;
  EncodeUsage(u, &pu);
  const GenerateUsage v = DecodeUsage(pu);
  EXPECT_EQ(v.prompt_tokens, 10);
  EXPECT_EQ(v.completion_tokens, 4);
  EXPECT_EQ(v.cached_tokens, 6);
  EXPECT_EQ(v.computed_tokens, 4);
  EXPECT_EQ(v.encoder_replay_tokens, 1);
  EXPECT_EQ(v.decoder_replay_tokens, 2);
  EXPECT_EQ(v.prefix_source, "cache");
  EXPECT_EQ(v.swa_source, "peer");
  EXPECT_DOUBLE_EQ(v.ttft_seconds, 0.25);

  NodeStatusReport r{kFp, "decoder", 3, 1, 100, 1u << 20, {{"s1", 12}, {"s2", 40}}};
  pb::NodeStatus ps;
  EncodeNodeStatus(r, &ps);
  const NodeStatusReport q = DecodeNodeStatus(ps);
  EXPECT_EQ(q.fingerprint, kFp);
  EXPECT_EQ(q.role, "decoder");
  EXPECT_EQ(q.running, 3);
  EXPECT_EQ(q.waiting, 1);
  EXPECT_EQ(q.queued_tokens, 100);
  EXPECT_EQ(q.resident_bytes, 1u << 20);
  EXPECT_EQ(q.warm_sessions, r.warm_sessions);
}

TEST(NodeCodecTest, SwaStateRequestRoundTripsAndChecksItsKeys) {
  pb::SwaStateRequest req;
  EncodeSwaStateRequest(Key(1), Key(2), 96, kFp, &req);
  UnitKey ns, key;
  ASSERT_TRUE(DecodeSwaStateRequest(req, kFp, &ns, &key).ok());
  EXPECT_EQ(ns, Key(1));
  EXPECT_EQ(key, Key(2));
  EXPECT_EQ(DecodeSwaStateRequest(req, std::string(64, 'b'), &ns, &key).code(), StatusCode::kFailedPrecondition);
  req.set_prefix_key("short");
  EXPECT_EQ(DecodeSwaStateRequest(req, kFp, &ns, &key).code(), StatusCode::kInvalidArgument);
}

TEST(NodeCodecTest, PrefillResponseRoundTrips) {
  PrefillOutput o{{"u1", "u2"}, "swa", "handoff", 64, 30, 5, "replay"};
  pb::PrefillResponse resp;
  EncodePrefillResponse(o, &resp);
  const PrefillOutput p = DecodePrefillResponse(&resp);
  EXPECT_EQ(p.units, o.units);
  EXPECT_EQ(p.swa, "swa");
  EXPECT_EQ(p.handoff, "handoff");
  EXPECT_EQ(p.cached_tokens, 64);
  EXPECT_EQ(p.computed_tokens, 30);
  EXPECT_EQ(p.replay_tokens, 5);
  EXPECT_EQ(p.swa_source, "replay");
}

}  // namespace
}  // namespace ds41
