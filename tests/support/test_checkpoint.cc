#include "tests/support/test_checkpoint.h"

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <vector>

#include "ckpt/writer.h"
#include "engine/presets.h"
#include "util/check.h"

namespace ds41::testing {
namespace {

std::mutex mu;
std::vector<std::string>* dirs = nullptr;

void RemoveAll() {
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
  std::lock_guard<std::mutex> l(mu);
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

}  // namespace ds41::testing
