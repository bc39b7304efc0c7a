// The trace reader: errors name the line, requests come back sorted; and the real trace's figures.
#include "trace/mooncake_trace.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <sstream>

#include "trace/workload.h"

namespace ds41 {
namespace {

StatusOr<std::vector<TraceRequest>> Parse(const std::string& text) {
  std::istringstream in(text);
  return ParseMooncakeTrace(in, "t.jsonl");
}

TEST(MooncakeTraceTest, ReadsAndSortsByTimestamp) {
  auto t = Parse(R"({"timestamp": 5, "input_length": 600, "output_length": 3, "hash_ids": [0, 1]}

{"timestamp": 2, "input_length": 10, "output_length": 0, "hash_ids": [0]}
{"timestamp": 5, "input_length": 1, "output_length": 1, "hash_ids": [7]}
)");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->size(), 3u);
  EXPECT_EQ((*t)[0].timestamp_ms, 2);
  EXPECT_EQ((*t)[1].input_length, 600);  // equal timestamps keep file order
  EXPECT_EQ((*t)[1].hash_ids, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ((*t)[2].hash_ids, (std::vector<int64_t>{7}));
}

TEST(MooncakeTraceTest, BadLinesAreErrorsNamingTheLine) {
  const std::string good = R"({"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [0]})";
  struct Case {
    std::string line, message;
  };
  const Case cases[] = {
      {"not json", "t.jsonl:2: not a JSON object"},
      {"[1, 2]", "t.jsonl:2: not a JSON object"},
      {R"({"input_length": 1, "output_length": 1, "hash_ids": []})", "t.jsonl:2: missing \"timestamp\""},
      {R"({"timestamp": 0, "output_length": 1, "hash_ids": []})", "t.jsonl:2: missing \"input_length\""},
      {R"({"timestamp": 0, "input_length": 1, "hash_ids": []})", "t.jsonl:2: missing \"output_length\""},
      {R"({"timestamp": 0, "input_length": 1, "output_length": 1})", "t.jsonl:2: missing \"hash_ids\""},
      {R"({"timestamp": 0, "input_length": -4, "output_length": 1, "hash_ids": []})",
       "t.jsonl:2: \"input_length\" is negative (-4)"},
      {R"({"timestamp": -1, "input_length": 1, "output_length": 1, "hash_ids": []})", "t.jsonl:2: \"timestamp\" is negative (-1)"},
      {R"({"timestamp": 1.5, "input_length": 1, "output_length": 1, "hash_ids": []})",
       "t.jsonl:2: \"timestamp\" must be an integer"},
      {R"({"timestamp": 0, "input_length": "7", "output_length": 1, "hash_ids": []})",
       "t.jsonl:2: \"input_length\" must be an integer"},
      {R"({"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": 3})", "t.jsonl:2: \"hash_ids\" must be an array"},
      {R"({"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [1, -2]})",
       "t.jsonl:2: \"hash_ids\" entries must be non-negative integers"},
      {R"({"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": ["a"]})",
       "t.jsonl:2: \"hash_ids\" entries must be non-negative integers"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.line);
    auto t = Parse(good + "\n" + c.line + "\n" + good + "\n");
    ASSERT_FALSE(t.ok());
    EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(t.status().message(), c.message);
  }
  auto missing = ReadMooncakeTrace("/nonexistent/trace.jsonl");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

// The real trace (../shared/data/mooncake), when it is there.
TEST(MooncakeTraceTest, TheConversationTraceFirst30Minutes) {
  const std::string path = DS41_MOONCAKE_TRACE;
  if (path.empty() || path.find("NOTFOUND") != std::string::npos || !std::filesystem::exists(path)) {
    GTEST_SKIP() << "the Mooncake trace is not beside the repository (../shared/data/mooncake, found by CMake as '"
                 << path << "')";
  }
  auto trace = ReadMooncakeTrace(path);
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  EXPECT_EQ(trace->size(), 5719u);
  for (const TraceRequest& t : *trace) {
    ASSERT_FALSE(t.hash_ids.empty());
    EXPECT_EQ(t.hash_ids[0], 0);  // every request shares block 0
  }
  const std::vector<WorkloadRequest> w = BuildWorkload(*trace, {});
  ASSERT_EQ(w.size(), 5719u);
  const HitCeiling c512 = PrefixHitCeiling(w, 512);
  const HitCeiling c64 = PrefixHitCeiling(BuildWorkload(*trace, {.token_scale = 0.125}), 64);
  int64_t sessions = 0;
  for (const WorkloadRequest& r : w) sessions = std::max<int64_t>(sessions, std::stoll(r.session.substr(1)) + 1);
  std::printf("first 30 min: %zu requests, %lld inferred sessions, %.1f s; ceiling at unit 512: %.2f %% of %lld prompt "
              "tokens; at 1/8 scale and unit 64: %.2f %%\n",
              w.size(), static_cast<long long>(sessions), w.back().arrival_s, 100 * c512.share(),
              static_cast<long long>(c512.prompt_tokens), 100 * c64.share());
  // The whole hour's figure is 37.4 % of tokens (36.6 % of blocks); the first half is near it.
  EXPECT_GT(c512.share(), 0.30);
  EXPECT_LT(c512.share(), 0.45);
  // Scaling keeps the block structure, so the ceiling barely moves.
  EXPECT_NEAR(c64.share(), c512.share(), 0.02);
  EXPECT_GT(sessions, 1000);
  EXPECT_LT(sessions, 5719);
}

}  // namespace
}  // namespace ds41
