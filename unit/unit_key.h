// Cache-unit keys: chained SHA-256 under a namespace (SERVING.md §3). The same bytes in every
// process and on every machine.
//
//   root    = SHA-256("ds41-unit-namespace" 0 | model fingerprint (32 B) | format version (u16 LE) | tenant salt)
//   k_0     = root
//   k_i     = SHA-256("ds41-unit" 0 | k_{i-1} | tokens of unit i as u32 LE)           full unit i >= 1
//   tail(k) = SHA-256("ds41-tail" 0 | k | tokens as u32 LE)                            a turn's tail after k
//   reply   = SHA-256("ds41-reply" 0 | root | reply digest (32 B))                      a reply record (reply_record.h)
//
// A different model, unit format or tenant salt changes the root and therefore every key.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "unit/unit_format.h"

namespace ds41 {

using UnitKey = std::array<uint8_t, 32>;

UnitKey NamespaceRoot(const Fingerprint& model, uint16_t format_version, const std::string& tenant_salt);
UnitKey ChainKey(const UnitKey& prev, const int32_t* tokens, size_t n);
UnitKey TailKey(const UnitKey& prev, const int32_t* tokens, size_t n);
// The key of the reply record whose digest (chat::AssistantSpan::digest) is `digest`.
UnitKey ReplyKey(const UnitKey& root, const std::array<uint8_t, 32>& digest);

// Keys of every full unit of a prompt: chain[i] covers tokens [i*U, (i+1)*U).
std::vector<UnitKey> ChainKeys(const UnitKey& root, const std::vector<int32_t>& tokens, int unit_tokens);

// The key of the prefix [0, pos) (what identifies an SWA snapshot at pos): the chain key when pos is
// on a unit boundary (the root for 0), else the tail key after the last full unit.
UnitKey PrefixKey(const UnitKey& root, const std::vector<int32_t>& tokens, int64_t pos, int unit_tokens);

// What a prompt carries at offset `offset` of an image span instead of the image token (every span
// position's model token): a negative id derived from the image's content hash, so that the chain
// keys above, built from token ids, separate two pictures and join two copies of one. Nodes map it
// back to the image token before the engine sees it.
int32_t ImageKeyToken(const std::array<uint8_t, 32>& image_hash, int64_t offset);

std::string KeyHex(const UnitKey& k);
// A key's 32 bytes as they travel (protobuf bytes fields, data-path frames, index keys).
inline std::string_view KeyView(const UnitKey& k) { return {reinterpret_cast<const char*>(k.data()), k.size()}; }
inline std::string KeyString(const UnitKey& k) { return std::string(KeyView(k)); }

}  // namespace ds41
