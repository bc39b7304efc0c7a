#include "node_client/node_protocol.h"

#include <cstring>

namespace ds41 {

Status CheckModel(const ds41::node::v1::ModelCheck& m, const std::string& fingerprint) {
  if (m.protocol_version() != kNodeProtocolVersion)
    return FailedPreconditionError("node protocol version " + std::to_string(m.protocol_version()) + ", this node speaks " +
                                   std::to_string(kNodeProtocolVersion));
  if (m.model_fingerprint() != fingerprint)
    return FailedPreconditionError("model fingerprint " + m.model_fingerprint().substr(0, 12) + "... differs from this node's " +
                                   fingerprint.substr(0, 12) + "...");
  return Status::Ok();
}

void FillModel(const std::string& fingerprint, ds41::node::v1::ModelCheck* m) {
  m->set_model_fingerprint(fingerprint);
  m->set_protocol_version(kNodeProtocolVersion);
}

Status ParseKey(const std::string& bytes, UnitKey* out) {
  if (bytes.size() != 32) return InvalidArgumentError("keys are 32 bytes");
  std::memcpy(out->data(), bytes.data(), 32);
  return Status::Ok();
}

Status ParseNs(const ds41::node::v1::CacheNs& ns, UnitKey* out) { return ParseKey(ns.id(), out).Prefixed("namespace"); }

}  // namespace ds41
