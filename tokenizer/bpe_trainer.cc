#include "tokenizer/bpe_trainer.h"

#include <algorithm>
#include <optional>
#include <queue>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizer/byte_level.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer.h"

namespace ds41 {
namespace {

uint64_t PairKey(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

struct HeapEntry {
  int64_t count;
  uint64_t key;
};
// Max-heap on count; among equal counts the smallest key (left id, then right id) is on top.
struct HeapLess {
  bool operator()(const HeapEntry& x, const HeapEntry& y) const {
    return x.count != y.count ? x.count < y.count : x.key > y.key;
  }
};

struct Word {
  std::vector<int32_t> syms;
  int64_t freq;
};

class Trainer {
 public:
  Trainer(std::vector<Word> words, std::vector<std::string> token_bytes)
      : words_(std::move(words)), bytes_(std::move(token_bytes)) {}

  // Learns merges until `target` tokens exist or no pair is left; returns (left, right) pairs.
  // `reserved` holds control contents, which no merged token may equal in raw or symbol form.
  std::vector<std::pair<int32_t, int32_t>> Run(size_t target,
                                               const std::unordered_set<std::string>& reserved) {
    std::unordered_set<std::string> existing(bytes_.begin(), bytes_.end());
    for (size_t w = 0; w < words_.size(); ++w) AddPairs(w);
    for (const auto& [key, count] : counts_) heap_.push({count, key});
    std::vector<std::pair<int32_t, int32_t>> merges;
    while (bytes_.size() < target && !heap_.empty()) {
      const HeapEntry top = heap_.top();
      heap_.pop();
      const auto it = counts_.find(top.key);
      const int64_t now = it == counts_.end() ? 0 : it->second;
      if (now != top.count) {  // Stale entry: requeue with the live count.
        if (now > 0) heap_.push({now, top.key});
        continue;
      }
      if (now <= 0) continue;
      const auto a = static_cast<int32_t>(top.key >> 32);
      const auto b = static_cast<int32_t>(top.key & 0xFFFFFFFFu);
      std::string merged = bytes_[a] + bytes_[b];
      if (existing.count(merged) || reserved.count(merged) ||
          reserved.count(tokenizer::BytesToSymbols(merged))) {
        counts_.erase(top.key);  // Never offer this pair again.
        continue;
      }
      const auto id = static_cast<int32_t>(bytes_.size());
      bytes_.push_back(merged);
      existing.insert(std::move(merged));
      merges.emplace_back(a, b);
      ApplyMerge(top.key, a, b, id);
    }
    return merges;
  }

  const std::vector<std::string>& token_bytes() const { return bytes_; }

 private:
  void AddPairs(size_t w) {
    const Word& word = words_[w];
    for (size_t i = 0; i + 1 < word.syms.size(); ++i) {
      const uint64_t key = PairKey(word.syms[i], word.syms[i + 1]);
      counts_[key] += word.freq;
      where_[key].push_back(static_cast<int32_t>(w));
    }
  }
  void RemovePairs(size_t w) {
    const Word& word = words_[w];
    for (size_t i = 0; i + 1 < word.syms.size(); ++i) {
      counts_[PairKey(word.syms[i], word.syms[i + 1])] -= word.freq;
    }
  }

  void ApplyMerge(uint64_t key, int32_t a, int32_t b, int32_t id) {
    std::vector<int32_t> touched = std::move(where_[key]);
    where_.erase(key);
    std::unordered_set<uint64_t> changed;
    int32_t last = -1;
    std::sort(touched.begin(), touched.end());
    for (int32_t w : touched) {
      if (w == last) continue;
      last = w;
      Word& word = words_[w];
      std::vector<int32_t> next;
      next.reserve(word.syms.size());
      bool hit = false;
      for (size_t i = 0; i < word.syms.size();) {
        if (i + 1 < word.syms.size() && word.syms[i] == a && word.syms[i + 1] == b) {
          next.push_back(id);
          i += 2;
          hit = true;
        } else {
          next.push_back(word.syms[i++]);
        }
      }
      if (!hit) continue;  // Stale index entry.
      RemovePairs(w);
      word.syms = std::move(next);
      AddPairs(w);
      for (size_t i = 0; i + 1 < word.syms.size(); ++i) {
        if (word.syms[i] == id || word.syms[i + 1] == id) {
          changed.insert(PairKey(word.syms[i], word.syms[i + 1]));
        }
      }
    }
    counts_.erase(key);
    // Pairs that grew need a fresh heap entry; pairs that shrank are fixed lazily on pop.
    for (uint64_t k : changed) heap_.push({counts_[k], k});
  }

  std::vector<Word> words_;
  std::vector<std::string> bytes_;  // id -> raw bytes (control ids hold their content)
  std::unordered_map<uint64_t, int64_t> counts_;
  std::unordered_map<uint64_t, std::vector<int32_t>> where_;
  std::priority_queue<HeapEntry, std::vector<HeapEntry>, HeapLess> heap_;
};

}  // namespace

StatusOr<std::string> TrainBpe(std::span<const std::string> corpus, int32_t vocab_size,
                               std::span<const std::string> control_tokens) {
  std::vector<std::string> controls = {std::string(kBosToken), std::string(kEosToken),
                                       std::string(kPadToken)};
  std::unordered_set<std::string> reserved(controls.begin(), controls.end());
  for (const std::string& c : control_tokens) {
    if (c.empty()) return InvalidArgumentError("TrainBpe: empty control token");
    const std::optional<std::string> as_bytes = tokenizer::SymbolsToBytes(c);
    if (as_bytes && as_bytes->size() == 1) {
      return InvalidArgumentError("TrainBpe: control token " + c + " collides with a byte symbol");
    }
    if (!reserved.insert(c).second) return InvalidArgumentError("TrainBpe: duplicate control token " + c);
    controls.push_back(c);
  }
  const auto first_byte_id = static_cast<int32_t>(controls.size());
  if (vocab_size < first_byte_id + 256) {
    return InvalidArgumentError("TrainBpe: vocab_size " + std::to_string(vocab_size) +
                                " leaves no room for the 256 byte symbols");
  }

  std::unordered_map<std::string_view, int64_t> freq;
  for (const std::string& text : corpus) {
    for (std::string_view piece : tokenizer::PreTokenize(text)) ++freq[piece];
  }
  std::vector<Word> words;
  words.reserve(freq.size());
  for (const auto& [piece, f] : freq) {
    if (piece.size() < 2) continue;  // Nothing to merge.
    Word w{{}, f};
    for (char ch : piece) w.syms.push_back(first_byte_id + static_cast<uint8_t>(ch));
    words.push_back(std::move(w));
  }
  // Word order only affects index lists, not results, but keep it canonical anyway.
  std::sort(words.begin(), words.end(), [](const Word& x, const Word& y) { return x.syms < y.syms; });

  std::vector<std::string> token_bytes = controls;
  for (int b = 0; b < 256; ++b) token_bytes.emplace_back(1, static_cast<char>(b));
  Trainer trainer(std::move(words), std::move(token_bytes));
  const auto merges = trainer.Run(static_cast<size_t>(vocab_size), reserved);
  const std::vector<std::string>& bytes = trainer.token_bytes();

  using Json = nlohmann::json;
  Json added = Json::array();
  Json vocab = Json::object();
  for (size_t id = 0; id < controls.size(); ++id) {
    added.push_back({{"id", id}, {"content", controls[id]}, {"single_word", false}, {"lstrip", false},
                     {"rstrip", false}, {"normalized", false}, {"special", true}});
    vocab[controls[id]] = id;
  }
  for (size_t id = controls.size(); id < bytes.size(); ++id) {
    vocab[tokenizer::BytesToSymbols(bytes[id])] = id;
  }
  Json merge_list = Json::array();
  for (const auto& [a, b] : merges) {
    merge_list.push_back({tokenizer::BytesToSymbols(bytes[a]), tokenizer::BytesToSymbols(bytes[b])});
  }
  Json root = {
      {"version", "1.0"},
      {"added_tokens", std::move(added)},
      {"normalizer", nullptr},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model",
       {{"type", "BPE"}, {"vocab", std::move(vocab)}, {"merges", std::move(merge_list)}}},
  };
  return root.dump(1);
}

}  // namespace ds41
