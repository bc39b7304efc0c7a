#include "engine/config/fingerprint.h"

#include <algorithm>
#include <vector>

#include "util/sha256.h"

namespace ds41 {

std::string ModelFingerprint(const ModelConfig& config, const SafetensorsCheckpoint& checkpoint, Fp4Numerics numerics) {
  Sha256 h;
  h.Update(config.ToJson());
  if (numerics != Fp4Numerics::kCanonical) h.Update(std::string("fp4-numerics ") + Fp4NumericsName(numerics) + "\n");
  std::vector<const TensorView*> views;
  for (const auto& [name, v] : checkpoint.tensors()) views.push_back(&v);
  std::sort(views.begin(), views.end(), [](const TensorView* a, const TensorView* b) { return a->name < b->name; });
  for (const TensorView* v : views) {
    h.Update(v->name + " " + v->Describe() + "\n");
    if (v->nbytes <= (64u << 10) && (v->dtype == DType::kBF16 || v->dtype == DType::kF32) && v->shape.size() == 1)
      h.Update(v->data, v->nbytes);
  }
  return h.HexDigest();
}

StatusOr<ModelIdentity> ReadModelIdentity(const std::string& dir) {
  ModelIdentity id;
  DS41_ASSIGN_OR_RETURN(id.config, ModelConfig::FromFile(dir + "/config.json"));
  DS41_ASSIGN_OR_RETURN(SafetensorsCheckpoint ckpt, SafetensorsCheckpoint::Open(dir));
  DS41_ASSIGN_OR_RETURN(const Fp4Numerics numerics, Fp4NumericsFromEnvironment());
  id.fingerprint = ModelFingerprint(id.config, ckpt, numerics);
  return id;
}

}  // namespace ds41
