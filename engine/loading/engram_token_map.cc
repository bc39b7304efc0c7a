#include "engine/loading/engram_token_map.h"

#include <nlohmann/json.hpp>
#include <unordered_set>

#include "util/mapped_file.h"

namespace ds41 {

StatusOr<std::vector<int32_t>> ParseEngramTokenMap(std::string_view text, const ModelConfig& config,
                                                   const std::string& path) {
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_array()) return InvalidArgumentError(path + ": expected a JSON list of integers");
  if (static_cast<int64_t>(j.size()) != config.vocab_size)
    return InvalidArgumentError(path + ": has " + std::to_string(j.size()) + " entries, vocab_size is " +
                                std::to_string(config.vocab_size));
  std::vector<int32_t> map;
  map.reserve(j.size());
  std::unordered_set<int32_t> distinct;
  for (size_t i = 0; i < j.size(); ++i) {
    if (!j[i].is_number_integer()) return InvalidArgumentError(path + ": entry " + std::to_string(i) + " is not an integer");
    const int64_t v = j[i].get<int64_t>();
    if (v < 0 || v >= config.engram_compressed_vocab_size)
      return InvalidArgumentError(path + ": entry " + std::to_string(i) + " = " + std::to_string(v) +
                                  " is outside [0, engram_compressed_vocab_size)");
    map.push_back(static_cast<int32_t>(v));
    distinct.insert(static_cast<int32_t>(v));
  }
  if (static_cast<int>(distinct.size()) != config.engram_compressed_vocab_size)
    return InvalidArgumentError(path + ": holds " + std::to_string(distinct.size()) +
                                " distinct compressed ids, engram_compressed_vocab_size is " +
                                std::to_string(config.engram_compressed_vocab_size));
  return map;
}

StatusOr<std::vector<int32_t>> LoadEngramTokenMap(const std::string& path, const ModelConfig& config) {
  DS41_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  return ParseEngramTokenMap(text, config, path);
}

}  // namespace ds41
