// ds41_tokenize TOKENIZER.json control|plain: reads a JSON array of strings on stdin and writes a
// JSON array of their token-id arrays (allow_control on for "control"). Used by bpe_encode_oracle.py.
#include <iostream>
#include <iterator>
#include <string>

#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: ds41_tokenize TOKENIZER.json control|plain < strings.json\n";
    return 2;
  }
  ds41::StatusOr<ds41::Tokenizer> tok = ds41::Tokenizer::Load(argv[1]);
  if (!tok.ok()) {
    std::cerr << tok.status().ToString() << "\n";
    return 1;
  }
  const bool allow_control = std::string(argv[2]) == "control";
  const std::string input((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  const nlohmann::json texts = nlohmann::json::parse(input, nullptr, /*allow_exceptions=*/false);
  if (!texts.is_array()) {
    std::cerr << "ds41_tokenize: stdin must be a JSON array of strings\n";
    return 2;
  }
  nlohmann::json out = nlohmann::json::array();
  for (const nlohmann::json& t : texts) {
    if (!t.is_string()) return 2;
    out.push_back(tok->Encode(t.get_ref<const std::string&>(), allow_control));
  }
  std::cout << out.dump() << '\n';
  return 0;
}
