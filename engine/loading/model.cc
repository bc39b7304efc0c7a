#include "engine/loading/model.h"

#include "engine/config/fingerprint.h"
#include "engine/kernels/kernels.h"
#include "engine/loading/engram_token_map.h"

namespace ds41 {

StatusOr<std::unique_ptr<Model>> Model::Open(const std::string& dir, const ModelOptions& options) {
  std::unique_ptr<Model> m(new Model());
  m->dir_ = dir;
  // The kernels' FP4 numerics start as the environment's: a value there that is not one is refused
  // before anything is bound, rather than served as canonical.
  DS41_RETURN_IF_ERROR(Fp4NumericsFromEnvironment().status());
  DS41_ASSIGN_OR_RETURN(m->config_, ModelConfig::FromFile(dir + "/config.json"));
  // Config-level consistency (Engram row counts) is reported before any tensor is looked at.
  DS41_ASSIGN_OR_RETURN(m->engram_, EngramLayout::Build(m->config_));
  DS41_ASSIGN_OR_RETURN(m->ckpt_, SafetensorsCheckpoint::Open(dir));
  DS41_ASSIGN_OR_RETURN(m->weights_, BindWeights(m->config_, m->ckpt_));
  DS41_ASSIGN_OR_RETURN(m->packed_, PackedWeights::Bind(dir, m->ckpt_, &m->weights_, options.weight_tiles, options.pack_dir));
  if (!m->config_.engram_layer_ids.empty()) {
    DS41_ASSIGN_OR_RETURN(m->token_map_, LoadEngramTokenMap(dir + "/engram_token_map.json", m->config_));
  }
  m->rope_plain_ = RopeTable(m->config_, /*yarn=*/false);
  m->rope_yarn_ = RopeTable(m->config_, /*yarn=*/true);

  m->fingerprint_ = ModelFingerprint(m->config_, m->ckpt_, Fp4NumericsInUse());
  return m;
}

}  // namespace ds41
