#include "trace/token_timing.h"

namespace ds41 {

void TimeTokens(const std::vector<ChunkBatch>& batches, int64_t completion_tokens, double arrival_s, RequestRecord* r) {
  r->itl_s.clear();
  if (batches.empty()) return;
  std::vector<int64_t> tokens;
  int64_t shown = 0;
  for (const ChunkBatch& b : batches) {
    tokens.push_back(b.chunks);
    shown += b.chunks;
  }
  if (int64_t hidden = completion_tokens - shown; hidden > 0) {
    if (batches.size() == 1) {
      tokens[0] += hidden;
    } else {
      const int64_t later = static_cast<int64_t>(batches.size()) - 1;
      for (int64_t j = 1; j <= later; ++j) tokens[static_cast<size_t>(j)] += hidden / later + (j <= hidden % later ? 1 : 0);
    }
  }
  r->ttft_s = batches[0].t_s - arrival_s;
  for (int64_t k = 1; k < tokens[0]; ++k) r->itl_s.push_back(0);
  for (size_t j = 1; j < batches.size(); ++j) {
    const double gap = (batches[j].t_s - batches[j - 1].t_s) / static_cast<double>(tokens[j]);
    for (int64_t k = 0; k < tokens[j]; ++k) r->itl_s.push_back(gap);
  }
}

}  // namespace ds41
