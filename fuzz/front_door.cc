#include "fuzz/front_door.h"

#include <cstdio>
#include <cstdlib>

#include "fuzz/fuzz_support.h"

namespace ds41::fuzz {

FrontDoor& FrontDoor::Get() {
  static FrontDoor* door = [] {
    auto tok = Tokenizer::Load(DataPath("tokenizer.json"));
    auto tenants = TenantTable::FromJson(
        R"({"keys": {"k1": {"tenant": "acme", "salt": "s1", "max_prompt_tokens": 64}, "k2": {"tenant": "beta"}}})");
    if (!tok.ok() || !tenants.ok()) {
      std::fprintf(stderr, "front door fixture: %s %s\n", tok.status().ToString().c_str(),
                   tenants.status().ToString().c_str());
      std::abort();
    }
    return new FrontDoor(std::move(*tok), std::move(*tenants));  // never freed: lives as long as the process
  }();
  return *door;
}

FrontDoor::FrontDoor(Tokenizer tok, TenantTable tenant_table)
    : tokenizer(std::move(tok)),
      tenants(std::move(tenant_table)),
      registry(std::make_shared<prometheus::Registry>()),
      metrics(*registry),
      nodes(/*client=*/nullptr),
      core(RouterOptions{}, &nodes, /*cache=*/nullptr, /*node_client=*/nullptr, &metrics),
      api(&core, &tokenizer, kFrontDoorModel, kFrontDoorContext, kFrontDoorVocab),
      workers(1),
      front(&api, &tenants, &nodes, &metrics, registry, &workers) {
  front.Register(&routes);
}

}  // namespace ds41::fuzz
