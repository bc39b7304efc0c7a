// ds41_train_bpe VOCAB_SIZE OUT.json FILE...: trains a byte-level BPE tokenizer on the files (one
// corpus text per line) and writes its tokenizer.json; prints the training time to stderr.
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "tokenizer/bpe_trainer.h"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::cerr << "usage: ds41_train_bpe VOCAB_SIZE OUT.json FILE...\n";
    return 2;
  }
  const int vocab_size = std::atoi(argv[1]);
  std::vector<std::string> corpus;
  size_t bytes = 0;
  for (int i = 3; i < argc; ++i) {
    std::ifstream in(argv[i], std::ios::binary);
    if (!in) {
      std::cerr << "cannot open " << argv[i] << "\n";
      return 1;
    }
    for (std::string line; std::getline(in, line);) {
      line.push_back('\n');
      bytes += line.size();
      corpus.push_back(std::move(line));
    }
  }
  const auto start = std::chrono::steady_clock::now();
  ds41::StatusOr<std::string> json = ds41::TrainBpe(corpus, vocab_size, {});
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!json.ok()) {
    std::cerr << json.status().ToString() << "\n";
    return 1;
  }
  std::ofstream(argv[2], std::ios::binary) << *json;
  std::cerr << "trained " << vocab_size << " tokens on " << bytes << " bytes in " << secs << " s\n";
  return 0;
}
