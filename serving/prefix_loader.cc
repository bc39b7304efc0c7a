#include "serving/prefix_loader.h"

#include <chrono>

#include "unit/state_units.h"
#include "util/clock.h"

namespace ds41 {

PrefixLoader::PrefixLoader(const Model& model, CacheClient* cache, NodeMetrics* metrics)
    : model_(model), cache_(cache), metrics_(metrics) {}

int64_t PrefixLoader::Load(const UnitKey& ns, const std::vector<int32_t>& tokens, int64_t upto, int unit_tokens,
                           SequenceState* state) const {
  if (upto <= 0 || cache_ == nullptr) return 0;
  const auto t0 = std::chrono::steady_clock::now();
  const int U = unit_tokens;
  const std::vector<int32_t> head(tokens.begin(), tokens.begin() + upto);
  const std::vector<UnitKey> chain = ChainKeys(ns, head, U);
  std::vector<UnitGet> gets;
  gets.reserve(chain.size() + 1);
  for (const UnitKey& k : chain) gets.push_back({k, std::nullopt});
  const int64_t full = static_cast<int64_t>(chain.size()) * U;
  if (full < upto) {
    const UnitKey parent = chain.empty() ? ns : chain.back();
    gets.push_back({TailKey(parent, head.data() + full, static_cast<size_t>(upto - full)), parent});
  }
  const auto got = cache_->Get(CacheNamespace{ns, model_.fingerprint(), kUnitFormatVersion}, gets);
  const auto layout = UnitLayout::FromConfig(model_.config(), U);
  std::vector<Unit> units;
  int64_t reach = 0;
  uint64_t bytes = 0;
  for (size_t i = 0; i < got.size() && layout.ok(); ++i) {
    if (!got[i]) break;
    auto u = DecodeUnit(*layout, *got[i]);
    // A chain unit holds exactly U positions; only the requested tail may hold fewer.
    const bool is_tail = static_cast<int64_t>(i) * U == full;
    if (!u.ok() || u->first_position != reach || (!is_tail && u->tokens != U)) break;
    bytes += got[i]->size();
    reach += u->tokens;
    units.push_back(std::move(*u));
  }
  if (!units.empty() && !ApplyUnits(*layout, units, state).ok()) return 0;
  if (metrics_) {
    metrics_->kv_bytes_in.Increment(static_cast<double>(bytes));
    metrics_->kv_transfer_seconds.Observe(SecondsSince(t0));
  }
  return reach;
}

}  // namespace ds41
