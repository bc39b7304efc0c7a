#include "sim/prefix_keys.h"

#include <algorithm>

namespace ds41::sim {

PrefixKeys::PrefixKeys(const WorkloadRequest& r, uint64_t salt)
    : tokens_(r.prompt_tokens), block_tokens_(std::max(1, r.block_tokens)), root_(MixKey(salt ^ 0x5eedULL)) {
  chain_.reserve(r.blocks.size());
  uint64_t h = root_;
  for (int64_t id : r.blocks) {
    h = MixKey(h ^ MixKey(static_cast<uint64_t>(id)));
    chain_.push_back(h);
  }
}

uint64_t PrefixKeys::At(int64_t n) const {
  if (n <= 0 || chain_.empty()) return root_;
  const size_t j = std::min(static_cast<size_t>((n - 1) / block_tokens_), chain_.size() - 1);
  return MixKey(chain_[j] ^ (static_cast<uint64_t>(n) * 0xd1b54a32d192ed03ULL));
}

std::vector<uint64_t> PrefixKeys::Chain(int unit) const {
  std::vector<uint64_t> out;
  if (unit <= 0 || tokens_ < 2) return out;
  const int64_t units = (tokens_ - 1) / unit;
  out.reserve(static_cast<size_t>(units));
  for (int64_t u = 1; u <= units; ++u) out.push_back(At(u * unit));
  return out;
}

int64_t CommonPrefix(const WorkloadRequest& x, const WorkloadRequest& y) {
  if (x.block_tokens != y.block_tokens) return 0;
  const int64_t bt = std::max(1, x.block_tokens);
  const size_t blocks = std::min(x.blocks.size(), y.blocks.size());
  int64_t n = 0;
  for (size_t j = 0; j < blocks; ++j) {
    if (x.blocks[j] != y.blocks[j]) break;
    // The same block: the tokens both prompts have of it agree.
    const int64_t start = static_cast<int64_t>(j) * bt;
    n = std::min({start + bt, x.prompt_tokens, y.prompt_tokens});
    if (n < start + bt) break;
  }
  return n;
}

}  // namespace ds41::sim
