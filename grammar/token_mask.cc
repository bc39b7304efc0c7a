#include "grammar/token_mask.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <string_view>

namespace ds41::grammar {
namespace {

// Bytes that change a string's state: its end, an escape, control bytes, and every byte of a
// multi-byte UTF-8 character (the matcher checks each against its lead).
bool BreaksString(uint8_t c) { return c == '"' || c == '\\' || c < 0x20 || c >= 0x80; }

void SetBit(TokenBitmask* m, int32_t id) { (*m)[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63); }

}  // namespace

void TokenMasker::Trie::Build(const std::vector<std::pair<std::string, int32_t>>& tokens) {
  // Children lists while inserting, then flattened so a node's edges are contiguous.
  std::vector<std::vector<std::pair<uint8_t, uint32_t>>> kids(1);
  std::vector<std::vector<int32_t>> node_ends(1);
  for (const auto& [bytes, id] : tokens) {
    uint32_t node = 0;
    for (char ch : bytes) {
      const auto c = static_cast<uint8_t>(ch);
      auto& k = kids[node];
      auto it = std::find_if(k.begin(), k.end(), [c](const auto& e) { return e.first == c; });
      if (it == k.end()) {
        kids.emplace_back();
        node_ends.emplace_back();
        const auto fresh = static_cast<uint32_t>(kids.size() - 1);
        kids[node].emplace_back(c, fresh);
        node = fresh;
      } else {
        node = it->second;
      }
    }
    node_ends[node].push_back(id);
  }
  first.assign(kids.size() + 1, 0);
  for (size_t i = 0; i < kids.size(); ++i) first[i + 1] = first[i] + static_cast<uint32_t>(kids[i].size());
  edge_byte.resize(first.back());
  edge_child.resize(first.back());
  for (size_t i = 0; i < kids.size(); ++i) {
    std::sort(kids[i].begin(), kids[i].end());
    for (size_t j = 0; j < kids[i].size(); ++j) {
      edge_byte[first[i] + j] = kids[i][j].first;
      edge_child[first[i] + j] = kids[i][j].second;
    }
  }
  ends = std::move(node_ends);
  depth = 0;
  for (const auto& [bytes, id] : tokens) depth = std::max(depth, static_cast<int>(bytes.size()));
}

TokenMasker::TokenMasker(const std::vector<std::string>& token_bytes, const std::vector<bool>& grammar_free,
                         int32_t vocab_size, int32_t eos)
    : vocab_(vocab_size), eos_(eos), bytes_(static_cast<size_t>(vocab_size)) {
  std::vector<std::pair<std::string, int32_t>> all;
  const size_t n = std::min(token_bytes.size(), static_cast<size_t>(vocab_size));
  for (size_t id = 0; id < n; ++id) {
    const std::string& b = token_bytes[id];
    if (b.empty() || (id < grammar_free.size() && grammar_free[id]) || static_cast<int32_t>(id) == eos) continue;
    bytes_[id] = b;
    all.emplace_back(b, static_cast<int32_t>(id));
  }
  all_.Build(all);
  // Every place inside a string or a number has its table up front, so no decode step stalls to
  // build one: a search from each kind's start over the bytes that keep it open.
  static const std::shared_ptr<const Grammar> kValues = [] {
    auto g = std::make_shared<Grammar>();
    for (NodeKind k : {NodeKind::kString, NodeKind::kNumber, NodeKind::kInteger}) g->nodes.emplace_back().kind = k;
    g->root = 0;
    return std::shared_ptr<const Grammar>(std::move(g));
  }();
  // ASCII that opens, escapes and ends values, and UTF-8 leads and continuations, so every place
  // inside a character (each lead's range of its next byte) has its table too.
  constexpr std::string_view kBytes =
      "\"\\/bfnrtu0123456789abcdefABCDEF-+.eExD8C"
      "\xC3\xE0\xE1\xED\xF0\xF1\xF4\x80\x90\xA0";
  for (int32_t node = 0; node < 3; ++node) {
    std::vector<JsonMatcher> todo = {JsonMatcher::Probe(kValues, Frame{node, 0, 0, 0})};
    std::set<std::string> seen;
    while (!todo.empty()) {
      const JsonMatcher probe = std::move(todo.back());
      todo.pop_back();
      for (const auto& [top, group] : probe.GroupsByTop()) {
        if (!top || !seen.insert(TableKey(group, *top)).second) continue;
        (void)TableFor(group, *top);
        for (char c : kBytes) {
          JsonMatcher next = group;
          if (next.Accept(static_cast<uint8_t>(c))) todo.push_back(std::move(next));
        }
      }
    }
  }
}

template <typename OnAccepted, typename OnRefused>
void TokenMasker::Traverse(const Trie& t, const JsonMatcher& m, const OnAccepted& accepted, const OnRefused& refused) {
  // Inside a string's text a string-safe byte leaves the state as it was: the child shares its
  // parent's state, so a token's plain text costs no matcher step. Other bytes step a copy kept per
  // depth (made when first reached), whose buffers later tokens reuse.
  struct Level {
    uint32_t node, edge;
    const JsonMatcher* state;
    bool in_text;
  };
  std::vector<JsonMatcher> slots;
  slots.reserve(static_cast<size_t>(t.depth) + 1);  // never reallocated: levels point into it
  std::vector<Level> path;
  path.push_back({0, t.first[0], &m, m.InsideFreeString()});
  while (!path.empty()) {
    Level& top = path.back();
    if (top.edge == t.first[top.node + 1]) {
      path.pop_back();
      continue;
    }
    const uint32_t e = top.edge++;
    const Level parent = top;
    const uint8_t c = t.edge_byte[e];
    const uint32_t child = t.edge_child[e];
    const JsonMatcher* state = parent.state;
    bool in_text = parent.in_text;
    if (!(in_text && !BreaksString(c))) {
      if (slots.size() <= path.size()) slots.resize(path.size() + 1, m);
      JsonMatcher& slot = slots[path.size()];
      slot = *parent.state;
      if (!slot.Accept(c)) {
        refused(child, *parent.state, path.size() - 1);
        continue;
      }
      state = &slot;
      in_text = slot.InsideFreeString();
    }
    if (!accepted(child, *state) || t.first[child] == t.first[child + 1]) continue;  // a leaf: nothing below
    path.push_back({child, t.first[child], state, in_text});
  }
}

std::unique_ptr<TokenMasker::TopTable> TokenMasker::BuildTable(const JsonMatcher& m, const Frame& top) const {
  // A probe reads the value alone: where it refuses a byte after the value ended, every token
  // below that edge ends the value there, and the rest of its bytes are the parent's to read.
  auto t = std::make_unique<TopTable>();
  t->within.assign((static_cast<size_t>(vocab_) + 63) / 64, 0);
  const JsonMatcher probe = JsonMatcher::Probe(m.grammar_ptr(), top);
  t->ends_before_any_byte = probe.IsComplete();
  std::vector<std::pair<std::string, int32_t>> ending;
  auto collect_below = [&](uint32_t node, size_t depth) {
    std::vector<uint32_t> todo = {node};
    while (!todo.empty()) {
      const uint32_t v = todo.back();
      todo.pop_back();
      for (int32_t id : all_.ends[v]) ending.emplace_back(bytes_[static_cast<size_t>(id)].substr(depth), id);
      for (uint32_t e = all_.first[v]; e < all_.first[v + 1]; ++e) todo.push_back(all_.edge_child[e]);
    }
  };
  Traverse(all_, probe,
           [&](uint32_t child, const JsonMatcher& state) {
             const bool inside = !state.stacks().empty() && !state.stacks()[0].empty();
             for (int32_t id : all_.ends[child]) {
               if (inside) {
                 SetBit(&t->within, id);
               } else {
                 ending.emplace_back("", id);  // the value ended with the token's last byte
               }
             }
             return true;
           },
           [&](uint32_t child, const JsonMatcher& parent, size_t depth) {
             // Ended before this byte: the parent reads on (at depth 0 that is any token: Fill walks them).
             if (depth > 0 && parent.IsComplete()) collect_below(child, depth);
           });
  t->ending.Build(ending);
  return t;
}

std::string TokenMasker::TableKey(const JsonMatcher& m, const Frame& top) {
  // What a value's bytes do depends on its kind (and raw text's terminator) and where inside it they
  // are, not on the node.
  const Node& n = m.grammar().nodes[static_cast<size_t>(top.node)];
  return std::to_string(static_cast<int>(n.kind)) + "/" + std::to_string(top.phase) + "/" + std::to_string(top.a) +
         "/" + std::to_string(top.b) + "/" +
         (n.kind == NodeKind::kRawUntil || n.kind == NodeKind::kTextWithout ? n.literal : std::string());
}

const TokenMasker::TopTable& TokenMasker::TableFor(const JsonMatcher& m, const Frame& top) const {
  const std::string key = TableKey(m, top);
  MutexLock l(&tables_mu_);
  std::unique_ptr<TopTable>& t = tables_[key];
  if (!t) t = BuildTable(m, top);
  return *t;
}

void TokenMasker::Walk(const Trie& t, const JsonMatcher& m, TokenBitmask* mask) const {
  Traverse(
      t, m,
      [&](uint32_t child, const JsonMatcher&) {
        for (int32_t id : t.ends[child]) SetBit(mask, id);
        return true;
      },
      [](uint32_t, const JsonMatcher&, size_t) {});
}

void TokenMasker::Fill(const JsonMatcher& m, TokenBitmask* mask) const {
  mask->assign((static_cast<size_t>(vocab_) + 63) / 64, 0);
  for (const auto& [top, group] : m.Expanded().GroupsByTop()) {
    if (!top) {
      Walk(all_, group, mask);
      continue;
    }
    const TopTable& t = TableFor(group, *top);
    for (size_t w = 0; w < mask->size(); ++w) (*mask)[w] |= t.within[w];
    const JsonMatcher ended = group.PopTops();
    for (int32_t id : t.ending.ends[0]) SetBit(mask, id);
    Walk(t.ending, ended, mask);
    if (t.ends_before_any_byte) Walk(all_, ended, mask);
  }
  if (eos_ >= 0 && eos_ < vocab_ && m.IsComplete()) SetBit(mask, eos_);
}

bool TokenMasker::Advance(JsonMatcher* m, int32_t token) const {
  if (token == eos_) return m->IsComplete();
  if (token < 0 || token >= vocab_ || bytes_[static_cast<size_t>(token)].empty()) return false;
  return m->AcceptBytes(bytes_[static_cast<size_t>(token)]);
}

}  // namespace ds41::grammar
