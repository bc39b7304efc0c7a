// The node protocol's shared checks: model fingerprint and protocol version on every call, bounded
// sizes. Mismatches are FAILED_PRECONDITION; malformed fields INVALID_ARGUMENT. Thread-safe: pure
// functions.
#pragma once

#include <string>

#include "node.pb.h"
#include "unit/unit_key.h"
#include "util/status.h"

namespace ds41 {

inline constexpr uint32_t kNodeProtocolVersion = 1;
inline constexpr size_t kMaxPromptTokens = 1 << 20;

Status CheckModel(const ds41::node::v1::ModelCheck& m, const std::string& fingerprint);
void FillModel(const std::string& fingerprint, ds41::node::v1::ModelCheck* m);
Status ParseNs(const ds41::node::v1::CacheNs& ns, UnitKey* out);
Status ParseKey(const std::string& bytes, UnitKey* out);

}  // namespace ds41
