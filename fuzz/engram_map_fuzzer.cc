// Surface: a checkpoint's engram_token_map.json (engine/loading/engram_token_map.h): the token
// id -> Engram compressed id map every node loads with the model.
//
// Input: bytes 0-1 (little-endian) and 2-3 set the config's vocab_size (1..4096) and
// engram_compressed_vocab_size (1..vocab_size), so the file's length can match it; the rest is
// the file.
// Properties: no crash or exception; an accepted map has vocab_size entries, each in
// [0, engram_compressed_vocab_size), every compressed id used (what the Engram lookups index with).
#include <vector>

#include "engine/config/presets.h"
#include "engine/loading/engram_token_map.h"
#include "fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  ds41::ModelConfig c = ds41::TinyConfig();
  c.vocab_size = 1 + (data[0] | data[1] << 8) % 4096;
  c.engram_compressed_vocab_size = 1 + (data[2] | data[3] << 8) % c.vocab_size;
  const std::string_view text(reinterpret_cast<const char*>(data + 4), size - 4);
  auto map = ds41::ParseEngramTokenMap(text, c, "engram_token_map.json");
  if (!map.ok()) return 0;
  DS41_FUZZ_CHECK(static_cast<int64_t>(map->size()) == c.vocab_size);
  std::vector<bool> used(static_cast<size_t>(c.engram_compressed_vocab_size));
  for (int32_t v : *map) {
    DS41_FUZZ_CHECK(v >= 0 && v < c.engram_compressed_vocab_size);
    used[static_cast<size_t>(v)] = true;
  }
  for (bool u : used) DS41_FUZZ_CHECK(u);
  return 0;
}
