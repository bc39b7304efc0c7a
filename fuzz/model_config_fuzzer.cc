// Surface: a checkpoint's config.json (engine/config/config.h), read by every role at start-up
// from a model folder an operator points it at; everything else about the model (unit layout,
// tensor shapes, the fingerprint's inputs) is derived from it.
//
// Input: the file's bytes.
// Properties: no crash or exception; a config that validates gives a unit layout at the default
// unit size (or a Status), whose payload sizes are positive, and derived sizes that do not
// overflow; Validate on an accepted config accepts it again.
#include "engine/config/config.h"
#include "fuzz/fuzz_support.h"
#include "unit/unit_format.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto config = ds41::ModelConfig::FromJson(std::string(reinterpret_cast<const char*>(data), size));
  if (!config.ok()) {
    DS41_FUZZ_CHECK(!config.status().message().empty());
    return 0;
  }
  ds41::ModelConfig again = *config;
  DS41_FUZZ_CHECK(again.Validate().ok());
  DS41_FUZZ_CHECK(config->main_kv_bytes() > 0 && config->index_key_bytes() > 0);
  for (const int unit : {ds41::kDefaultUnitTokens, 2, 128}) {
    auto layout = ds41::UnitLayout::FromConfig(*config, unit);
    if (!layout.ok()) continue;
    DS41_FUZZ_CHECK(layout->sources.size() == config->kv_source_layers.size());
    DS41_FUZZ_CHECK(layout->PayloadBytes(unit) > 0);
  }
  return 0;
}
