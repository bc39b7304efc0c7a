// Token timing of one streamed reply as the client saw it: time to first token and every
// inter-token gap, from the times the text chunks were received.
//
// The server sends one chunk per generated token whose text can be released; a token whose bytes
// are held back (an unfinished UTF-8 character) comes out with a later chunk, and several chunks
// may arrive in one read. So the client sees batches: a read time and the chunks in it. A batch of
// k tokens after the previous one contributes k gaps of (its gap / k); the first batch's extra
// tokens arrived with the first token (gaps of 0). Tokens the chunks do not show (completion
// tokens beyond the chunk count) are spread evenly over the batches after the first.
#pragma once

#include <cstdint>
#include <vector>

#include "trace/request_record.h"

namespace ds41 {

struct ChunkBatch {
  double t_s = 0;      // when the read returned, on the run's clock
  int64_t chunks = 0;  // text chunks it completed (>= 1)
};

// Sets r->ttft_s (first batch - arrival_s) and r->itl_s. No batches: leaves both unset.
void TimeTokens(const std::vector<ChunkBatch>& batches, int64_t completion_tokens, double arrival_s, RequestRecord* r);

}  // namespace ds41
