#include "serving/model_flags.h"

#include <CLI/CLI.hpp>
#include <iostream>

namespace ds41 {

void AddModelFlags(CLI::App& app, ModelOptions* o) {
  app.add_option_function<std::string>(
         "--weight-tiles",
         [o](const std::string& s) {
           auto t = ParseWeightTiles(s);
           if (!t.ok()) throw CLI::ValidationError("--weight-tiles", t.status().message());
           o->weight_tiles = *t;
         },
         "tile-major weight copy for the matmuls: file (beside the checkpoint or in --weight-tiles-dir, built "
         "once), memory, off")
      ->envname("DS41_WEIGHT_TILES");
  app.add_option("--weight-tiles-dir", o->pack_dir, "folder of the tile-major weight file (default: the checkpoint's)")
      ->envname("DS41_WEIGHT_TILES_DIR");
}

StatusOr<std::unique_ptr<Model>> OpenModelVerbose(const std::string& name, const std::string& dir,
                                                  const ModelOptions& options) {
  auto model = Model::Open(dir, options);
  if (model.ok()) std::cerr << name << ": tile-major weights " << (*model)->packed().summary() << "\n";
  return model;
}

}  // namespace ds41
