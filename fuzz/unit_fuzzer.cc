// Surface: cache unit bytes (unit/unit_format.h), which arrive from the store, from peers and from
// encoders (in a Prefill response) and are decoded with their CRC-32C checksum before any byte is
// used.
//
// Input: byte 0 bit 0 asks the harness to rewrite the checksum over the mutated bytes, so the
// search also reaches the checks behind it (a real peer can send a unit with a valid checksum and
// any header); bits 1-2 pick the layout (tiny or small preset at 64 tokens per unit, tiny at 16
// or 2); the rest is the unit.
// Properties: no crash; VerifyUnitBytes and DecodeUnit agree (a decoded unit passed the store's
// checks, with the same header fields); a decoded unit encodes back to exactly the input bytes
// (the decoder accepts nothing it would not write); a unit of the wrong checksum never decodes.
#include <cstring>
#include <vector>

#include "engine/config/presets.h"
#include "fuzz/fuzz_support.h"
#include "unit/unit_format.h"
#include "util/crc32c.h"

namespace {

const std::vector<ds41::UnitLayout>& Layouts() {
  static const std::vector<ds41::UnitLayout> layouts = [] {
    std::vector<ds41::UnitLayout> v;
    const std::pair<ds41::ModelConfig, int> wanted[] = {
        {ds41::TinyConfig(), 64}, {ds41::SmallConfig(), 64}, {ds41::TinyConfig(), 16}, {ds41::TinyConfig(), 2}};
    for (const auto& [config, unit] : wanted) {
      auto l = ds41::UnitLayout::FromConfig(config, unit);
      v.push_back(l.ok() ? *l : *ds41::UnitLayout::FromConfig(ds41::TinyConfig(), 64));
    }
    return v;
  }();
  return layouts;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const ds41::UnitLayout& layout = Layouts()[(data[0] >> 1) & 3];
  std::string bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  if ((data[0] & 1) && bytes.size() >= 4) {
    const uint32_t crc = ds41::Crc32c(bytes.data(), bytes.size() - 4);
    std::memcpy(bytes.data() + bytes.size() - 4, &crc, 4);
  }
  const auto header = ds41::VerifyUnitBytes(bytes);
  const auto unit = ds41::DecodeUnit(layout, bytes);
  if (!unit.ok()) return 0;
  DS41_FUZZ_CHECK(header.ok());
  DS41_FUZZ_CHECK(header->model == unit->model && header->first_position == unit->first_position &&
                  header->tokens == unit->tokens);
  DS41_FUZZ_CHECK(header->tail == unit->is_tail(layout));
  DS41_FUZZ_CHECK(ds41::EncodeUnit(layout, *unit) == bytes);
  return 0;
}
