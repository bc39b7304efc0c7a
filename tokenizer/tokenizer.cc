#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tokenizer/byte_level.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/utf8.h"

namespace ds41 {

using tokenizer::BytesToSymbols;
using tokenizer::ByteToCodepoint;
using tokenizer::SymbolsToBytes;

namespace {

using Json = nlohmann::json;

// Ids beyond this are rejected, and ids must be reasonably dense (see FromJson): the id-indexed
// tables are sized by the largest id, so a hostile file must not be able to demand gigabytes.
constexpr int64_t kMaxId = 1 << 24;
constexpr int64_t kMaxUnusedIds = 4096;

Status Invalid(std::string m) { return InvalidArgumentError("tokenizer.json: " + std::move(m)); }

// Parses one merges entry, "a b" or ["a", "b"].
bool ParseMerge(const Json& m, std::string* a, std::string* b) {
  if (m.is_string()) {
    const std::string& s = m.get_ref<const std::string&>();
    const size_t sp = s.find(' ');
    if (sp == std::string::npos || sp == 0 || sp + 1 == s.size() ||
        s.find(' ', sp + 1) != std::string::npos) {
      return false;
    }
    *a = s.substr(0, sp);
    *b = s.substr(sp + 1);
    return true;
  }
  if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
    *a = m[0].get<std::string>();
    *b = m[1].get<std::string>();
    return true;
  }
  return false;
}

}  // namespace

StatusOr<Tokenizer> Tokenizer::Load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError("cannot open tokenizer file: " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return DataLossError("cannot read tokenizer file: " + path);
  StatusOr<Tokenizer> t = FromJson(ss.str());
  if (!t.ok()) return t.status().Prefixed(path);
  return t;
}

StatusOr<Tokenizer> Tokenizer::FromJson(std::string_view json_text) {
  const Json root = Json::parse(json_text.begin(), json_text.end(), nullptr,
                                /*allow_exceptions=*/false);
  if (root.is_discarded()) return Invalid("not valid JSON");
  if (!root.is_object()) return Invalid("top level is not an object");
  const auto model_it = root.find("model");
  if (model_it == root.end() || !model_it->is_object()) return Invalid("missing object \"model\"");
  const Json& model = *model_it;
  const auto type_it = model.find("type");
  if (type_it != model.end() && !(type_it->is_string() && *type_it == "BPE")) {
    return Invalid("model.type is not \"BPE\"");
  }
  const auto vocab_it = model.find("vocab");
  if (vocab_it == model.end() || !vocab_it->is_object()) return Invalid("missing object model.vocab");
  const auto merges_it = model.find("merges");
  if (merges_it == model.end() || !merges_it->is_array()) return Invalid("missing array model.merges");

  Tokenizer t;
  int64_t max_id = -1;
  std::vector<std::pair<std::string, int32_t>> entries;  // (vocab string, id)
  for (const auto& [key, value] : vocab_it->items()) {
    if (!value.is_number_integer()) return Invalid("vocab entry \"" + key + "\" has a non-integer id");
    const int64_t id = value.get<int64_t>();
    if (id < 0 || id >= kMaxId) return Invalid("vocab id out of range for \"" + key + "\"");
    max_id = std::max(max_id, id);
    entries.emplace_back(key, static_cast<int32_t>(id));
  }
  struct Added {
    std::string content;
    int32_t id;
  };
  std::vector<Added> added;
  if (const auto it = root.find("added_tokens"); it != root.end() && !it->is_null()) {
    if (!it->is_array()) return Invalid("added_tokens is not an array");
    for (const Json& a : *it) {
      if (!a.is_object()) return Invalid("added_tokens entry is not an object");
      const auto id_it = a.find("id");
      const auto content_it = a.find("content");
      if (id_it == a.end() || !id_it->is_number_integer() || content_it == a.end() ||
          !content_it->is_string()) {
        return Invalid("added_tokens entry needs integer \"id\" and string \"content\"");
      }
      const int64_t id = id_it->get<int64_t>();
      if (id < 0 || id >= kMaxId) return Invalid("added token id out of range");
      std::string content = content_it->get<std::string>();
      if (content.empty()) return Invalid("added token with empty content");
      max_id = std::max(max_id, id);
      added.push_back({std::move(content), static_cast<int32_t>(id)});
    }
  }
  if (max_id < 0) return Invalid("empty vocabulary");
  if (max_id >= 2 * static_cast<int64_t>(entries.size() + added.size()) + kMaxUnusedIds) {
    return Invalid("ids are too sparse (largest id " + std::to_string(max_id) + ")");
  }

  const size_t n = static_cast<size_t>(max_id) + 1;
  t.bytes_.resize(n);
  t.assigned_.assign(n, 0);
  t.control_.assign(n, 0);
  for (const Added& a : added) {
    if (t.control_[a.id]) return Invalid("added token id " + std::to_string(a.id) + " appears twice");
    if (t.by_string_.count(a.content)) return Invalid("added token content \"" + a.content + "\" appears twice");
    t.control_[a.id] = 1;
    t.assigned_[a.id] = 1;
    t.bytes_[a.id] = a.content;
    t.by_string_[a.content] = a.id;
  }
  for (auto& [key, id] : entries) {
    if (t.control_[id]) {
      // An added token also listed in the vocabulary must agree with it.
      if (t.bytes_[id] != key) return Invalid("vocab id " + std::to_string(id) + " disagrees with added_tokens");
      continue;
    }
    if (t.assigned_[id]) return Invalid("vocab id " + std::to_string(id) + " appears twice");
    // An entry outside the byte-level alphabet decodes as its own UTF-8 text; BPE reaches it only
    // through merges, which are checked below.
    std::optional<std::string> raw = SymbolsToBytes(key);
    t.assigned_[id] = 1;
    t.bytes_[id] = raw ? std::move(*raw) : key;
    t.by_string_.emplace(std::move(key), id);
  }
  for (int b = 0; b < 256; ++b) {
    std::string sym;
    tokenizer::AppendUtf8(ByteToCodepoint(static_cast<uint8_t>(b)), &sym);
    const auto it = t.by_string_.find(sym);
    if (it == t.by_string_.end() || t.control_[it->second]) {
      return Invalid("vocabulary lacks the byte symbol for byte " + std::to_string(b));
    }
    t.byte_id_[b] = it->second;
  }

  std::string a, b;
  int32_t rank = 0;
  for (const Json& m : *merges_it) {
    if (!ParseMerge(m, &a, &b)) return Invalid("merge #" + std::to_string(rank) + " is malformed");
    const auto ia = t.by_string_.find(a);
    const auto ib = t.by_string_.find(b);
    const auto ir = t.by_string_.find(a + b);
    if (ia == t.by_string_.end() || ib == t.by_string_.end() || ir == t.by_string_.end()) {
      return Invalid("merge \"" + a + " " + b + "\" uses a token not in the vocabulary");
    }
    // Merges that touch a control id are dropped: plain text must never reach a control token.
    if (!t.control_[ia->second] && !t.control_[ib->second] && !t.control_[ir->second]) {
      // Keeps Decode(Encode(s)) == s for every file that loads.
      if (t.bytes_[ir->second] != t.bytes_[ia->second] + t.bytes_[ib->second]) {
        return Invalid("merge \"" + a + " " + b + "\" does not concatenate its parts' bytes");
      }
      // A repeated pair keeps its first (lowest) rank.
      t.merges_.emplace(PairKey(ia->second, ib->second), Merge{rank, ir->second});
    }
    if (rank == std::numeric_limits<int32_t>::max()) return Invalid("too many merges");
    ++rank;
  }

  t.control_by_first_byte_.resize(256);
  for (const Added& x : added) {
    t.control_by_first_byte_[static_cast<uint8_t>(x.content[0])].push_back(x.id);
  }
  for (auto& bucket : t.control_by_first_byte_) {
    std::sort(bucket.begin(), bucket.end(), [&](int32_t x, int32_t y) {
      return t.bytes_[x].size() != t.bytes_[y].size() ? t.bytes_[x].size() > t.bytes_[y].size() : x < y;
    });
  }
  return t;
}

void Tokenizer::EncodePiece(std::string_view piece, std::vector<int32_t>* out) const {
  // Symbols form a linked list; a min-heap of candidate merges ordered by (rank, position) picks
  // the next merge, as in the reference implementation. Entries are validated when popped, so
  // merging costs O(n log n) even for one very long piece (untrusted input).
  struct Node {
    int32_t id;
    int32_t prev;
    int32_t next;  // -1 at the ends
  };
  struct Candidate {
    int32_t rank;
    int32_t pos;
    int32_t left;
    int32_t right;
    int32_t result;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  const auto n = static_cast<int32_t>(piece.size());
  if (n == 1) {
    out->push_back(byte_id_[static_cast<uint8_t>(piece[0])]);
    return;
  }
  std::vector<Node> nodes(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) {
    nodes[i] = {byte_id_[static_cast<uint8_t>(piece[i])], i - 1, i + 1 < n ? i + 1 : -1};
  }
  std::vector<Candidate> heap;
  const auto push = [&](int32_t pos) {
    const int32_t next = nodes[pos].next;
    if (next < 0) return;
    const auto it = merges_.find(PairKey(nodes[pos].id, nodes[next].id));
    if (it == merges_.end()) return;
    heap.push_back({it->second.rank, pos, nodes[pos].id, nodes[next].id, it->second.result});
    std::push_heap(heap.begin(), heap.end(), std::greater<>());
  };
  for (int32_t i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<>());
    const Candidate c = heap.back();
    heap.pop_back();
    Node& left = nodes[c.pos];
    // Stale if the left node was absorbed (id -1) or either side changed since the push.
    if (left.id != c.left || left.next < 0 || nodes[left.next].id != c.right) continue;
    const int32_t dead = left.next;
    left.id = c.result;
    left.next = nodes[dead].next;
    if (left.next >= 0) nodes[left.next].prev = c.pos;
    nodes[dead].id = -1;
    if (left.prev >= 0) push(left.prev);
    push(c.pos);
  }
  for (int32_t i = 0; i >= 0; i = nodes[i].next) out->push_back(nodes[i].id);
}

void Tokenizer::EncodeText(std::string_view text, std::vector<int32_t>* out) const {
  for (std::string_view piece : tokenizer::PreTokenize(text)) EncodePiece(piece, out);
}

std::vector<int32_t> Tokenizer::Encode(std::string_view text, bool allow_control) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 1);
  if (!allow_control) {
    EncodeText(text, &out);
    return out;
  }
  size_t plain_start = 0;
  for (size_t i = 0; i < text.size();) {
    int32_t hit = -1;
    for (int32_t id : control_by_first_byte_[static_cast<uint8_t>(text[i])]) {
      if (text.substr(i).starts_with(bytes_[id])) {
        hit = id;
        break;
      }
    }
    if (hit < 0) {
      ++i;
      continue;
    }
    EncodeText(text.substr(plain_start, i - plain_start), &out);
    out.push_back(hit);
    i += bytes_[hit].size();
    plain_start = i;
  }
  EncodeText(text.substr(plain_start), &out);
  return out;
}

std::string_view Tokenizer::TokenBytes(int32_t id) const {
  if (id < 0 || id >= vocab_size()) return {};
  return bytes_[id];
}

std::string Tokenizer::Decode(std::span<const int32_t> ids) const {
  std::string out;
  for (int32_t id : ids) out.append(TokenBytes(id));
  return out;
}

std::optional<int32_t> Tokenizer::IdOf(std::string_view token) const {
  const auto it = by_string_.find(std::string(token));
  if (it == by_string_.end()) return std::nullopt;
  return it->second;
}

bool Tokenizer::IsControl(int32_t id) const { return id >= 0 && id < vocab_size() && control_[id]; }

std::string StreamDecoder::Feed(int32_t id) {
  pending_.append(tokenizer_->TokenBytes(id));
  return Drain(/*final=*/false);
}

std::string StreamDecoder::Feed(std::span<const int32_t> ids) {
  for (int32_t id : ids) pending_.append(tokenizer_->TokenBytes(id));
  return Drain(/*final=*/false);
}

std::string StreamDecoder::Flush() { return Drain(/*final=*/true); }

std::string StreamDecoder::Drain(bool final) {
  const size_t ready = final ? pending_.size() : tokenizer::CompleteUtf8Prefix(pending_);
  std::string out;
  out.reserve(ready);
  const std::string_view view(pending_.data(), ready);
  for (size_t i = 0; i < view.size();) {
    const tokenizer::Utf8Unit u = tokenizer::DecodeUtf8At(view, i);
    if (u.valid) {
      out.append(view.substr(i, u.len));
    } else {
      out.append("\xEF\xBF\xBD");  // U+FFFD
    }
    i += u.len;
  }
  pending_.erase(0, ready);
  return out;
}

}  // namespace ds41
