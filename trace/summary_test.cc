// The summary on hand-made records: percentiles (nearest rank), goodput, the hit share against the
// ceiling, and per-node load with its CV.
#include "trace/summary.h"

#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

namespace ds41 {
namespace {

TEST(SummaryTest, NearestRankPercentiles) {
  const std::vector<double> v = {10, 1, 9, 2, 8, 3, 7, 4, 6, 5};
  EXPECT_EQ(Percentile(v, 0), 1);
  EXPECT_EQ(Percentile(v, 10), 1);
  EXPECT_EQ(Percentile(v, 11), 2);
  EXPECT_EQ(Percentile(v, 50), 5);
  EXPECT_EQ(Percentile(v, 90), 9);
  EXPECT_EQ(Percentile(v, 99), 10);
  EXPECT_EQ(Percentile(v, 100), 10);
  EXPECT_EQ(Percentile({}, 50), 0);
  EXPECT_EQ(Percentile({3.5}, 99), 3.5);
}

TEST(SummaryTest, CoefficientOfVariation) {
  EXPECT_DOUBLE_EQ(CoefficientOfVariation({0.6, 0.4}), 0.2);  // sd 0.1 over mean 0.5
  EXPECT_EQ(CoefficientOfVariation({0.5}), 0);
  EXPECT_EQ(CoefficientOfVariation({0, 0}), 0);
  EXPECT_NEAR(CoefficientOfVariation({2.0 / 3, 1.0 / 3, 0}), std::sqrt(2.0 / 27) * 3, 1e-12);
}

RequestRecord Ok(double ttft, std::vector<double> itl, double e2e, int64_t prompt, int64_t cached, std::string dec,
                 std::string enc, int64_t computed) {
  RequestRecord r;
  r.ttft_s = ttft;
  r.itl_s = std::move(itl);
  r.e2e_s = e2e;
  r.prompt_tokens = prompt;
  r.cached_tokens = cached;
  r.decoder = std::move(dec);
  r.encoder = std::move(enc);
  r.computed_tokens = computed;
  r.completion_tokens = static_cast<int64_t>(r.itl_s.size()) + 1;
  r.kv_bytes_read = KvBytesRead(cached, "cache");
  return r;
}

TEST(SummaryTest, HandMadeRun) {
  std::vector<RequestRecord> rs = {
      Ok(1.0, {0.1, 0.1}, 2, 100, 50, "d0", "e0", 50),     // meets the SLO
      Ok(3.0, {0.05}, 4, 100, 0, "d1", "e0", 100),         // TTFT too long
      Ok(0.5, {0.3, 0.3}, 1, 200, 100, "d0", "e1", 100),   // gaps too long
  };
  for (const char* o : {"rejected", "timeout", "failed"}) {
    RequestRecord r;
    r.outcome = o;
    r.prompt_tokens = 1000;  // not counted in the hit share
    r.e2e_s = 0.004;         // the refusal's answer came in 4 ms
    rs.push_back(r);
  }
  const Summary s = Summarize(rs, HitCeiling{.prompt_tokens = 400, .hit_tokens = 200}, {.ttft_s = 2, .itl_s = 0.2}, 10,
                              {.decoders = {"d0", "d1", "d2"}, .encoders = {}});
  EXPECT_EQ(s.requests, 6);
  EXPECT_EQ(s.ok, 3);
  EXPECT_EQ(s.rejected, 1);
  EXPECT_EQ(s.timeout, 1);
  EXPECT_EQ(s.failed, 1);
  EXPECT_DOUBLE_EQ(s.hit_share, 150.0 / 400);
  EXPECT_DOUBLE_EQ(s.ceiling_share, 0.5);
  EXPECT_DOUBLE_EQ(s.hit_over_ceiling, 0.75);
  EXPECT_DOUBLE_EQ(s.ttft_mean, 1.5);
  EXPECT_EQ(s.ttft_p50, 1.0);
  EXPECT_EQ(s.ttft_p90, 3.0);
  EXPECT_EQ(s.ttft_p99, 3.0);
  EXPECT_EQ(s.itl_p50, 0.1);  // of {0.05, 0.1, 0.1, 0.3, 0.3}
  EXPECT_EQ(s.itl_p99, 0.3);
  EXPECT_DOUBLE_EQ(s.e2e_mean, 7.0 / 3);
  EXPECT_EQ(s.e2e_p99, 4.0);
  EXPECT_EQ(s.reject_p50, 0.004);
  EXPECT_EQ(s.reject_p99, 0.004);
  EXPECT_EQ(s.good, 1);
  EXPECT_DOUBLE_EQ(s.goodput_rps, 0.1);
  EXPECT_DOUBLE_EQ(s.goodput_share, 1.0 / 6);
  EXPECT_EQ(s.encoder_tokens, 250);
  EXPECT_EQ(s.kv_bytes_read, 150 * 890);
  // Decoders: d0 2, d1 1, d2 idle (expected): shares 2/3, 1/3, 0.
  ASSERT_EQ(s.decoders.nodes.size(), 3u);
  EXPECT_EQ(s.decoders.nodes.at("d2").requests, 0);
  EXPECT_NEAR(s.decoders.request_cv, std::sqrt(2.0 / 27) * 3, 1e-12);
  EXPECT_DOUBLE_EQ(s.decoders.request_max_over_mean, 2.0);
  // Encoders: e0 2 requests and 150 tokens, e1 1 and 100.
  EXPECT_NEAR(s.encoders.request_cv, 1.0 / 3, 1e-12);
  EXPECT_NEAR(s.encoders.token_cv, 0.2, 1e-12);
  EXPECT_NEAR(s.encoders.token_max_over_mean, 1.2, 1e-12);
  EXPECT_DOUBLE_EQ(s.encoders.nodes.at("e0").token_share, 0.6);

  std::ostringstream os;
  Summary labelled = s;
  labelled.label = "cost@90";
  PrintSummary(os, labelled);
  EXPECT_NE(os.str().find("run cost@90: 6 requests"), std::string::npos) << os.str();
  EXPECT_NE(os.str().find("37.5 % of prompt tokens"), std::string::npos) << os.str();
  EXPECT_NE(os.str().find("refusals        answered in p50 4.0 ms, p99 4.0 ms"), std::string::npos) << os.str();
  const nlohmann::json j = SummaryJson(labelled);
  EXPECT_EQ(j["ttft_s"]["p90"], 3.0);
  EXPECT_EQ(j["decoders"]["nodes"]["d0"]["requests"], 2);
  EXPECT_EQ(j["label"], "cost@90");
}

TEST(SummaryTest, WallSecondsAndEmptyRuns) {
  RequestRecord a, b;
  a.arrival_s = 1;
  a.e2e_s = 4;
  b.arrival_s = 3;
  b.e2e_s = 1;
  EXPECT_DOUBLE_EQ(WallSecondsOf({a, b}), 5);
  const Summary s = Summarize({}, {}, {}, 0);
  EXPECT_EQ(s.requests, 0);
  EXPECT_EQ(s.ttft_p99, 0);
  EXPECT_EQ(s.goodput_rps, 0);
}

}  // namespace
}  // namespace ds41
