#include "cache_service/grpc_requests.h"

namespace ds41 {
namespace {

namespace pb = ds41::cache::v1;

NamespaceFields Fields(const pb::Namespace& n) { return {n.id(), n.model_fingerprint(), n.format_version()}; }

}  // namespace

StatusOr<CheckedPut> CheckPutRequest(const RequestChecks& checks, const pb::PutRequest& req) {
  return checks.CheckPut(Fields(req.ns()), req.ref().key(), req.ref().parent(), req.unit());
}

StatusOr<CheckedKeys> CheckGetRequest(const RequestChecks& checks, const pb::GetRequest& req) {
  CheckedKeys c;
  DS41_RETURN_IF_ERROR(checks.CheckNamespace(Fields(req.ns()), &c.ns));
  DS41_RETURN_IF_ERROR(checks.CheckKeyCount(req.refs_size()));
  c.keys.resize(req.refs_size());
  for (int i = 0; i < req.refs_size(); ++i)
    if (!ToKey(req.refs(i).key(), &c.keys[i])) return InvalidArgumentError("unit key must be 32 bytes");
  return c;
}

StatusOr<CheckedKeys> CheckLookupRequest(const RequestChecks& checks, const pb::LookupRequest& req) {
  CheckedKeys c;
  DS41_RETURN_IF_ERROR(checks.CheckNamespace(Fields(req.ns()), &c.ns));
  DS41_RETURN_IF_ERROR(checks.CheckKeyCount(req.keys_size()));
  if (req.first_is_root() && req.keys_size() == 0) return InvalidArgumentError("first_is_root without keys");
  c.keys.resize(req.keys_size());
  for (int i = 0; i < req.keys_size(); ++i)
    if (!ToKey(req.keys(i), &c.keys[i])) return InvalidArgumentError("key must be 32 bytes");
  return c;
}

StatusOr<Key32> CheckDeleteNamespaceRequest(const RequestChecks& checks, const pb::DeleteNamespaceRequest& req) {
  Key32 ns{};
  DS41_RETURN_IF_ERROR(checks.CheckNamespace(Fields(req.ns()), &ns));
  return ns;
}

}  // namespace ds41
