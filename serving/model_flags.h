// The model options a node binary exposes: where the tile-major weight copy lives.
#pragma once

#include "engine/model.h"

namespace CLI {
class App;
}

namespace ds41 {

// --weight-tiles file|memory|off (env DS41_WEIGHT_TILES), --weight-tiles-dir (env DS41_WEIGHT_TILES_DIR).
void AddModelFlags(CLI::App& app, ModelOptions* options);

// Model::Open, then one line on stderr saying where the weights' tile-major copy came from.
StatusOr<std::unique_ptr<Model>> OpenModelVerbose(const std::string& name, const std::string& dir,
                                                  const ModelOptions& options);

}  // namespace ds41
