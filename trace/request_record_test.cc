// Record files: a JSONL round trip with a header line, and errors naming the line and field.
#include "trace/request_record.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "trace/run_header.h"

namespace ds41 {
namespace {

std::string TempPath(const std::string& name) {
  return (testing::TempDir().empty() ? std::string("/tmp/") : testing::TempDir()) + name + "." +
         std::to_string(::getpid());
}

RequestRecord Sample(int64_t i) {
  RequestRecord r;
  r.index = i;
  r.session = "s" + std::to_string(i % 3);
  r.arrival_s = 0.125 * static_cast<double>(i);
  r.start_s = r.arrival_s + 0.01;
  r.prompt_tokens = 300;
  r.output_tokens = 12;
  r.completion_tokens = 12;
  r.cached_tokens = 192;
  r.computed_tokens = 108;
  r.encoder_replay_tokens = 3;
  r.decoder_replay_tokens = 5;
  r.prefix_source = i % 2 ? "warm" : "cache";
  r.kv_bytes_read = KvBytesRead(r.cached_tokens, r.prefix_source);
  r.ttft_s = 0.1 / 3;
  r.e2e_s = 0.7;
  r.predicted_ttft_s = 0.02;
  r.router_ttft_s = 0.03;
  r.itl_s = {0.01, 0.02, 1.0 / 7};
  r.decoder = "127.0.0.1:7600";
  r.encoder = "127.0.0.1:7501";
  r.placement_reason = "warm session";
  r.http_status = 200;
  r.error = "quote \" and newline \n";
  return r;
}

TEST(RequestRecordTest, JsonLineRoundTrip) {
  const RequestRecord r = Sample(3);
  const std::string line = ToJsonLine(r);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  auto back = ParseRecord(line);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(ToJsonLine(*back), line);
  EXPECT_EQ(back->itl_s[2], 1.0 / 7);  // doubles survive exactly
  EXPECT_EQ(back->kv_bytes_read, 0);   // warm: nothing read from the store
  EXPECT_EQ(Sample(2).kv_bytes_read, 192 * 890);
}

TEST(RequestRecordTest, BadRecordsNameTheField) {
  EXPECT_EQ(ParseRecord("{").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseRecord("[]").status().message(), "a record must be a JSON object");
  EXPECT_EQ(ParseRecord(R"({"ttft_s": "x"})").status().message(), "record field \"ttft_s\" has the wrong type");
  EXPECT_EQ(ParseRecord(R"({"itl_s": [1, "a"]})").status().message(), "record field \"itl_s\" has the wrong type");
  EXPECT_EQ(ParseRecord(R"({"index": 1.5})").status().message(), "record field \"index\" has the wrong type");
  EXPECT_EQ(ParseRecord(R"({"outcome": "great"})").status().message(),
            "record field \"outcome\" is \"great\", not ok, rejected, failed or timeout");
  auto partial = ParseRecord(R"({"index": 4, "outcome": "timeout"})");
  ASSERT_TRUE(partial.ok());
  EXPECT_EQ(partial->index, 4);
  EXPECT_FALSE(partial->ok());
  EXPECT_EQ(partial->ttft_s, -1);
}

TEST(RequestRecordTest, FileRoundTripWithHeader) {
  const std::string path = TempPath("records.jsonl");
  RunHeader h;
  h.label = "cost@90";
  h.unit_tokens = 64;
  h.ceiling = {.prompt_tokens = 1000, .hit_tokens = 300};
  h.slo = {.ttft_s = 1.5, .itl_s = 0.1};
  h.nodes.decoders = {"a", "b"};
  h.options = {{"time_scale", 4}};
  std::vector<RequestRecord> rs;
  for (int i = 0; i < 5; ++i) rs.push_back(Sample(i));
  ASSERT_TRUE(WriteRecordFile(path, rs, RunHeaderJson(h)).ok());
  auto f = ReadRecordFile(path);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  ASSERT_EQ(f->records.size(), 5u);
  for (size_t i = 0; i < rs.size(); ++i) EXPECT_EQ(ToJsonLine(f->records[i]), ToJsonLine(rs[i]));
  auto back = RunHeaderFromJson(f->header);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->label, "cost@90");
  EXPECT_EQ(back->unit_tokens, 64);
  EXPECT_EQ(back->ceiling.hit_tokens, 300);
  EXPECT_EQ(back->slo.itl_s, 0.1);
  EXPECT_EQ(back->nodes.decoders, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(back->options["time_scale"], 4);

  // Without a header; then a bad line is named.
  ASSERT_TRUE(WriteRecordFile(path, rs).ok());
  f = ReadRecordFile(path);
  ASSERT_TRUE(f.ok());
  EXPECT_TRUE(f->header.is_null());
  {
    std::ofstream out(path, std::ios::app);
    out << "\n{\"prompt_tokens\": \"many\"}\n";
  }
  f = ReadRecordFile(path);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().message(), path + ":7: record field \"prompt_tokens\" has the wrong type");
  std::remove(path.c_str());
  EXPECT_EQ(ReadRecordFile(path).status().code(), StatusCode::kNotFound);
}

TEST(RequestRecordTest, WriterAppendsAndFlushes) {
  const std::string path = TempPath("writer.jsonl");
  auto w = RecordWriter::Open(path);
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->Append(Sample(1)).ok());
  // Flushed at once: a reader sees the record before the writer is closed.
  auto f = ReadRecordFile(path);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->records.size(), 1u);
  ASSERT_TRUE((*w)->Close().ok());
  EXPECT_FALSE((*w)->Append(Sample(2)).ok());
  std::remove(path.c_str());
}

}  // namespace
}  // namespace ds41
