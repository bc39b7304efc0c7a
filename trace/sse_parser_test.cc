// SSE framing: events come whole however the bytes are cut.
#include "trace/sse_parser.h"

#include <gtest/gtest.h>

#include <vector>

namespace ds41 {
namespace {

std::vector<std::string> FeedInPieces(const std::string& stream, size_t piece) {
  SseParser p;
  std::vector<std::string> events;
  for (size_t i = 0; i < stream.size(); i += piece) {
    p.Feed(std::string_view(stream).substr(i, piece), [&](std::string_view d) { events.emplace_back(d); });
  }
  return events;
}

TEST(SseParserTest, EventsSurviveAnyCut) {
  const std::string stream =
      "data: {\"a\":1}\n\n"
      ": a comment\r\n"
      "event: x\r\ndata: two\r\ndata:lines\r\n\r\n"
      "data: [DONE]\n\n"
      "data: unfinished";
  const std::vector<std::string> want = {"{\"a\":1}", "two\nlines", "[DONE]"};
  for (size_t piece : {1, 2, 3, 7, 1000}) {
    SCOPED_TRACE(piece);
    EXPECT_EQ(FeedInPieces(stream, piece), want);
  }
}

}  // namespace
}  // namespace ds41
