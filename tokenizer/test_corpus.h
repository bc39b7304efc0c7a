// Small mixed-script corpus shared by the tokenizer tests.
#pragma once

#include <string>
#include <vector>

namespace ds41::tokenizer {

inline std::vector<std::string> TestCorpus() {
  std::vector<std::string> corpus;
  const char* lines[] = {
      "The quick brown fox jumps over the lazy dog. 1234567890\n",
      "def tokenize(text):\n    return [t for t in text.split() if t]\n",
      "東京は日本の首都です。カタカナとひらがな。\n",
      "Привет, мир! Ελληνικά κείμενα. עברית ערבית العربية\n",
      "Emoji 😀🎉 and symbols ∑∫√ ≤ ≥ → ←\n",
      "<｜tool▁call▁begin｜> is markup, but in plain text it is just text.\n",
  };
  for (int i = 0; i < 40; ++i) {
    for (const char* l : lines) corpus.push_back(std::string(l) + std::to_string(i * 37));
  }
  return corpus;
}

}  // namespace ds41::tokenizer
