#include "unit/state_units.h"

#include <algorithm>

namespace ds41 {

StatusOr<std::vector<BuiltUnit>> BuildUnits(const ModelConfig& c, const UnitLayout& l, const Fingerprint& model,
                                            const SequenceState& st, const std::vector<int32_t>& tokens,
                                            const UnitKey& root, int64_t from, int64_t to) {
  const int U = l.unit_tokens;
  if (from < 0 || from % U != 0 || to < from) return InvalidArgumentError("units must start on a unit boundary");
  if (static_cast<int64_t>(tokens.size()) < to) return InvalidArgumentError("units need the tokens they cover");
  for (size_t s = 0; s < st.kv.size(); ++s)
    if (st.kv[s].processed < to) return FailedPreconditionError("the state's global KV ends before the units do");
  std::vector<BuiltUnit> out;
  UnitKey prev = root;
  for (int64_t i = 0; i < from; i += U) prev = ChainKey(prev, tokens.data() + i, U);
  for (int64_t first = from; first < to; first += U) {
    const int n = static_cast<int>(std::min<int64_t>(U, to - first));
    Unit u;
    u.model = model;
    u.first_position = first;
    u.tokens = n;
    for (size_t s = 0; s < l.sources.size(); ++s) {
      const auto& src = l.sources[s];
      const KvSourceCache& kv = st.kv[s];
      const int64_t e0 = first / src.ratio, e1 = (first + n) / src.ratio;
      UnitSource us;
      us.main_kv.assign(kv.main_kv.begin() + e0 * src.main_bytes, kv.main_kv.begin() + e1 * src.main_bytes);
      us.index_keys.assign(kv.index_keys.begin() + e0 * src.index_bytes, kv.index_keys.begin() + e1 * src.index_bytes);
      const int open = n % src.ratio;
      if (open > 0) {
        if (kv.processed != first + n)
          return FailedPreconditionError("a tail inside a compressor group needs the state to end at the tail");
        us.carry_kv.assign(kv.pending_kv.begin(), kv.pending_kv.begin() + open * src.head_dim);
        us.carry_gate.assign(kv.pending_gate.begin(), kv.pending_gate.begin() + open * src.head_dim);
      }
      u.sources.push_back(std::move(us));
    }
    BuiltUnit b;
    b.first = first;
    b.tokens = n;
    if (n == U) {
      b.key = ChainKey(prev, tokens.data() + first, U);
      prev = b.key;
    } else {
      b.key = TailKey(prev, tokens.data() + first, static_cast<size_t>(n));
      b.parent = prev;
    }
    b.bytes = EncodeUnit(l, u);
    out.push_back(std::move(b));
  }
  return out;
}

Status ApplyUnits(const UnitLayout& l, const std::vector<Unit>& units, SequenceState* st) {
  if (units.empty()) return Status::Ok();
  const int U = l.unit_tokens;
  const int64_t start = units[0].first_position;
  if (start % U != 0) return InvalidArgumentError("units must start on a unit boundary");
  for (size_t s = 0; s < st->kv.size(); ++s)
    if (st->kv[s].processed / l.sources[s].ratio * l.sources[s].ratio < start)
      return FailedPreconditionError("the units do not follow on from the state's global KV");
  int64_t pos = start;
  for (size_t i = 0; i < units.size(); ++i) {
    if (units[i].first_position != pos) return InvalidArgumentError("units are not contiguous");
    if (units[i].tokens < U && i + 1 != units.size()) return InvalidArgumentError("only the last unit may be a tail");
    if (units[i].sources.size() != st->kv.size()) return InvalidArgumentError("unit layout differs from the model's");
    pos += units[i].tokens;
  }
  for (size_t s = 0; s < st->kv.size(); ++s) {
    const auto& src = l.sources[s];
    KvSourceCache& kv = st->kv[s];
    const int64_t e0 = start / src.ratio;
    kv.main_kv.resize(e0 * src.main_bytes);
    kv.index_keys.resize(e0 * src.index_bytes);
    std::fill(kv.pending_kv.begin(), kv.pending_kv.end(), 0.0f);
    std::fill(kv.pending_gate.begin(), kv.pending_gate.end(), 0.0f);
    for (const Unit& u : units) {
      const UnitSource& us = u.sources[s];
      kv.main_kv.insert(kv.main_kv.end(), us.main_kv.begin(), us.main_kv.end());
      kv.index_keys.insert(kv.index_keys.end(), us.index_keys.begin(), us.index_keys.end());
      if (!us.carry_kv.empty()) {
        std::copy(us.carry_kv.begin(), us.carry_kv.end(), kv.pending_kv.begin());
        std::copy(us.carry_gate.begin(), us.carry_gate.end(), kv.pending_gate.begin());
      }
    }
    kv.processed = pos;
  }
  st->length = pos;
  return Status::Ok();
}

}  // namespace ds41
