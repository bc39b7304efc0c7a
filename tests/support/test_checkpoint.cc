#include "tests/support/test_checkpoint.h"

#include <cstdlib>
#include <filesystem>
#include <random>
#include <vector>

#include "ckpt/tokenizer_corpus.h"
#include "ckpt/writer.h"
#include "engine/config/presets.h"
#include "util/check.h"
#include "util/mutex.h"
#include "util/thread_annotations.h"

namespace ds41::testing {
namespace {

Mutex mu;
std::vector<std::string>* dirs DS41_GUARDED_BY(mu) = nullptr;

void RemoveAll() {
  MutexLock l(&mu);
  if (dirs == nullptr) return;
  for (const auto& d : *dirs) {
    std::error_code ec;
    std::filesystem::remove_all(d, ec);
  }
}

}  // namespace

std::string TempDir(const std::string& tag) {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/ds41-" + tag + "-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  DS41_CHECK(mkdtemp(buf.data()) != nullptr, "mkdtemp failed for " << tmpl);
  MutexLock l(&mu);
  if (dirs == nullptr) {
    dirs = new std::vector<std::string>();
    std::atexit(RemoveAll);
  }
  dirs->push_back(buf.data());
  return buf.data();
}

std::string WriteTestCheckpoint(const ModelConfig& config, uint64_t seed, const std::string& tag) {
  CheckpointWriteOptions opt;
  opt.out_dir = TempDir(tag);
  opt.seed = seed;
  Status s = WriteCheckpoint(config, opt);
  DS41_CHECK(s.ok(), s.ToString());
  return opt.out_dir;
}

const std::string& TinyCheckpoint() {
  static const std::string dir = WriteTestCheckpoint(TinyConfig(), 1, "tiny");
  return dir;
}

const std::string& SmallServingCheckpoint() {
  static const std::string dir = [] {
    std::string d = WriteTestCheckpoint(SmallConfig(), 1, "small");
    // A deterministic corpus of prose, code and CJK fragments.
    static const char* kWords[] = {"the", "model", "cache", "token", "prefix", "session", "agent", "tool", "result",
                                   "def", "return", "if", "for", "int", "const", "{", "}", "(", ")", ";", "=", "->",
                                   "\n", "12", "345", "错误", "数据", "テスト", "Hello", "world", ",", ".", "\"", "#"};
    std::mt19937 rng(1);
    std::vector<std::string> corpus(8);
    // Common words, plus random letter strings so merges never run out before the model's
    // vocabulary is filled (every id the model can emit then decodes to text).
    for (auto& text : corpus) {
      for (int i = 0; i < 6000; ++i) {
        if (rng() % 2) {
          text += kWords[rng() % std::size(kWords)];
        } else {
          for (int n = 1 + static_cast<int>(rng() % 7); n > 0; --n) text += static_cast<char>('a' + rng() % 26);
        }
        text += rng() % 4 ? " " : "";
      }
    }
    Status s = WriteTrainedTokenizer(corpus, static_cast<int32_t>(SmallConfig().vocab_size), d);
    DS41_CHECK(s.ok(), s.ToString());
    return d;
  }();
  return dir;
}

}  // namespace ds41::testing
