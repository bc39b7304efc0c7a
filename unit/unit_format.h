// Cache units: the persistent, shareable form of the model's global KV (SERVING.md §3,
// docs/unit_format.md). A unit holds, for each KV-source layer, the FP4 main-KV entries and FP4
// index keys (MODEL.md §10.3 byte formats) of a run of tokens starting at a unit boundary, plus,
// for a tail unit that ends inside a ratio-m group, that open group's fp32 compressor carry.
//
// Bytes: header (magic, format version, model fingerprint, first position, token count, layer
// layout) | payload | CRC-32C of everything before it. Thread-safe: pure functions.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/config/config.h"
#include "util/status.h"

namespace ds41 {

inline constexpr uint16_t kUnitFormatVersion = 1;
inline constexpr int kDefaultUnitTokens = 64;
inline constexpr size_t kMaxUnitBytes = 16u << 20;  // refuse anything larger on the wire

using Fingerprint = std::array<uint8_t, 32>;

// Parses a 64-character hex model fingerprint (Model::fingerprint()).
StatusOr<Fingerprint> ParseFingerprint(std::string_view hex);

// The payload layout of one model at one unit size: which KV sources, their ratios and entry sizes.
struct UnitLayout {
  struct Source {
    int layer = 0;
    int ratio = 1;
    int main_bytes = 0;   // per entry (288 at the release's dimensions)
    int index_bytes = 0;  // per entry (68)
    int head_dim = 0;     // floats per carried token
  };
  std::vector<Source> sources;
  int unit_tokens = kDefaultUnitTokens;

  // REQUIRES nothing; InvalidArgument unless unit_tokens is even, positive and a multiple of every
  // KV source's ratio.
  static StatusOr<UnitLayout> FromConfig(const ModelConfig& config, int unit_tokens);

  // Payload bytes of a unit of `tokens` tokens starting at a unit boundary.
  size_t PayloadBytes(int tokens) const;
};

// One source's share of a unit.
struct UnitSource {
  std::vector<uint8_t> main_kv;     // [entries][main_bytes]
  std::vector<uint8_t> index_keys;  // [entries][index_bytes]
  std::vector<float> carry_kv;      // [tokens % ratio][head_dim] fp32 (tail units only)
  std::vector<float> carry_gate;
};

struct Unit {
  Fingerprint model{};
  int64_t first_position = 0;  // a multiple of unit_tokens
  int32_t tokens = 0;          // unit_tokens for a full unit, fewer for a tail
  std::vector<UnitSource> sources;

  bool is_tail(const UnitLayout& l) const { return tokens < l.unit_tokens; }
};

std::string EncodeUnit(const UnitLayout& layout, const Unit& unit);

// Decodes and checks everything: magic, version, checksum, flags (the tail flag set exactly when
// the unit holds fewer than unit_tokens tokens), layout against `layout`, sizes. DataLoss for a
// corrupted unit, InvalidArgument for one of another layout or model. A unit that decodes encodes
// back to the same bytes (fuzz/unit_fuzzer.cc checks it).
StatusOr<Unit> DecodeUnit(const UnitLayout& layout, std::string_view bytes);

// What a store can check without knowing the model: framing, version, flags (none but the tail
// flag) and checksum; returns the header fields it needs.
struct UnitHeader {
  Fingerprint model{};
  int64_t first_position = 0;
  int32_t tokens = 0;
  bool tail = false;
};
StatusOr<UnitHeader> VerifyUnitBytes(std::string_view bytes);

}  // namespace ds41
