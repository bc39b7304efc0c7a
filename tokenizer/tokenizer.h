// DeepSeek-V4.1 tokenizer: byte-level BPE over the release's pre-tokenizer, loaded from a
// Hugging Face tokenizer.json. Control (added) tokens are matched only when the caller allows it,
// so untrusted text such as tool results can never produce markup ids.
//
// Tokenizer is thread-safe once loaded: every method is const and reads immutable tables, so one
// instance serves all requests. StreamDecoder is thread-compatible: one per stream.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "util/status.h"

namespace ds41 {

// The release's fixed special tokens and their ids.
inline constexpr std::string_view kBosToken = "<｜begin▁of▁sentence｜>";
inline constexpr std::string_view kEosToken = "<｜end▁of▁sentence｜>";
inline constexpr std::string_view kPadToken = "<｜▁pad▁｜>";
inline constexpr int32_t kBosId = 0;
inline constexpr int32_t kEosId = 1;
inline constexpr int32_t kPadId = 2;

class Tokenizer {
 public:
  // Reads a tokenizer.json (model.type "BPE"). Only model.vocab, model.merges ("a b" or
  // ["a", "b"]) and added_tokens (id, content) are used; added-token flags such as lstrip are
  // ignored and the pre-tokenizer is always the release's (pretokenizer.h). Every added token is a
  // control token; merges that touch one are dropped. All 256 byte symbols must be present.
  // Malformed input is INVALID_ARGUMENT (NOT_FOUND for a missing file), never a crash.
  static StatusOr<Tokenizer> Load(const std::string& path);
  static StatusOr<Tokenizer> FromJson(std::string_view json);

  // Any byte string is accepted. With allow_control, occurrences of control-token contents become
  // their ids (leftmost, then longest, first); without it they are encoded as ordinary text, and
  // no id returned is ever a control id.
  std::vector<int32_t> Encode(std::string_view text, bool allow_control) const;

  // Concatenated bytes of the ids (control tokens as their content). Ids outside the vocabulary
  // or unassigned are skipped. The result is not necessarily valid UTF-8.
  std::string Decode(std::span<const int32_t> ids) const;

  // Raw bytes of one token; empty for an unknown id.
  std::string_view TokenBytes(int32_t id) const;

  // Id of a vocabulary entry (byte-level form, e.g. "Ġthe") or of a control token's content.
  std::optional<int32_t> IdOf(std::string_view token) const;

  bool IsControl(int32_t id) const;

  // One past the largest id in use.
  int32_t vocab_size() const { return static_cast<int32_t>(bytes_.size()); }

 private:
  struct Merge {
    int32_t rank;
    int32_t result;
  };
  static uint64_t PairKey(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }

  void EncodeText(std::string_view text, std::vector<int32_t>* out) const;
  void EncodePiece(std::string_view piece, std::vector<int32_t>* out) const;

  std::vector<std::string> bytes_;   // id -> raw bytes
  std::vector<uint8_t> assigned_;     // id -> 1 if the id exists
  std::vector<uint8_t> control_;      // id -> 1 for added tokens
  std::unordered_map<std::string, int32_t> by_string_;  // vocab string / control content -> id
  std::unordered_map<uint64_t, Merge> merges_;
  std::array<int32_t, 256> byte_id_{};  // byte -> id of its byte symbol
  // Control tokens bucketed by first byte, longest first, for the allow_control scan.
  std::vector<std::vector<int32_t>> control_by_first_byte_;
};

// Incremental detokenizer for streaming: Feed returns only complete UTF-8 text and holds a trailing
// partial multi-byte sequence until the bytes that finish it arrive. Bytes that can never become
// well-formed are emitted as U+FFFD. REQUIRES: the Tokenizer outlives the decoder.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer) : tokenizer_(&tokenizer) {}

  std::string Feed(int32_t id);
  std::string Feed(std::span<const int32_t> ids);
  // End of stream: returns any held partial sequence as U+FFFD and resets.
  std::string Flush();

 private:
  std::string Drain(bool final);

  const Tokenizer* tokenizer_;
  std::string pending_;
};

}  // namespace ds41
