// ds41_pretokenize: reads a JSON array of strings on stdin and writes a JSON array holding, for
// each string, the array of its pre-tokenizer pieces. Used by pretokenize_oracle.py.
#include <iostream>
#include <iterator>
#include <string>

#include <nlohmann/json.hpp>

#include "tokenizer/pretokenizer.h"

int main() {
  const std::string input((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  const nlohmann::json texts = nlohmann::json::parse(input, nullptr, /*allow_exceptions=*/false);
  if (!texts.is_array()) {
    std::cerr << "ds41_pretokenize: stdin must be a JSON array of strings\n";
    return 2;
  }
  nlohmann::json out = nlohmann::json::array();
  for (const nlohmann::json& t : texts) {
    if (!t.is_string()) {
      std::cerr << "ds41_pretokenize: non-string element\n";
      return 2;
    }
    nlohmann::json pieces = nlohmann::json::array();
    for (std::string_view p : ds41::tokenizer::PreTokenize(t.get_ref<const std::string&>())) {
      pieces.push_back(std::string(p));
    }
    out.push_back(std::move(pieces));
  }
  std::cout << out.dump(-1, ' ', /*ensure_ascii=*/true) << '\n';
  return 0;
}
