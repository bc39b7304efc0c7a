// The driver that runs a harness without libFuzzer: the default (GCC) build links it into every
// fuzz/<name>_fuzzer so the harness is a ctest (label fuzz). It runs every corpus file once, then
// a fixed number of mutations of them drawn from a seeded PRNG (bit flips, byte sets, inserts,
// deletions, truncations, duplicated ranges, interesting integers, splices with another file), so
// a run is the same on every machine and a failure reproduces with the same command. It finds
// shallow bugs and keeps the corpus as regression inputs; coverage-guided search with sanitizers
// is the campaign's job (scripts/fuzz.sh, docs/fuzzing.md).
//
// Usage: <harness> [--mutations N] [--seed S] [--max-len BYTES] [--max-seconds T] PATH...
// PATH is a corpus file or folder (read recursively, in sorted order). --max-seconds stops the
// mutation phase early (then the count depends on the machine; the corpus always runs whole).
// When an input crashes the process, it is written to ./crash-<harness>-input first.
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

#include "fuzz/fuzz_support.h"

// A harness that needs no set-up defines no LLVMFuzzerInitialize; the weak reference is then null.
extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) __attribute__((weak));

namespace {

// The input being run, for the crash handler (which may only use async-signal-safe calls).
const uint8_t* g_input = nullptr;
size_t g_input_size = 0;
char g_crash_path[512] = "crash-input";

void OnCrash(int sig) {
  const int fd = ::open(g_crash_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) {
    size_t done = 0;
    while (g_input && done < g_input_size) {
      const ssize_t n = ::write(fd, g_input + done, g_input_size - done);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    ::close(fd);
  }
  static const char kMsg[] = "standalone fuzz driver: the input that crashed is in ./";
  [[maybe_unused]] ssize_t w = ::write(2, kMsg, sizeof(kMsg) - 1);
  w = ::write(2, g_crash_path, std::strlen(g_crash_path));
  w = ::write(2, "\n", 1);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

// splitmix64: small, fast, and the same sequence everywhere.
class Rng {
 public:
  explicit Rng(uint64_t seed) : x_(seed) {}
  uint64_t Next() {
    uint64_t z = (x_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  size_t Below(size_t n) { return n == 0 ? 0 : static_cast<size_t>(Next() % n); }

 private:
  uint64_t x_;
};

using Bytes = std::vector<uint8_t>;

// Bytes that often sit at decision points: JSON and HTTP punctuation, DSML's '<' and '|', NUL, the
// sign bits.
constexpr uint8_t kInterestingBytes[] = {0, 1, 0x7f, 0x80, 0xff, '"', '\\', '{', '}', '[', ']', ',', ':',
                                         '\r', '\n', ' ', '<', '>', '|', '/', '0', '9', '-', 'e'};
constexpr uint64_t kInterestingInts[] = {0, 1, 0x7f, 0x80, 0xff, 0x7fff, 0x8000, 0xffff, 0x7fffffff, 0x80000000,
                                         0xffffffff, 0x100000000ull, 0x7fffffffffffffffull, ~0ull};

void Mutate(Bytes* b, const std::vector<Bytes>& corpus, Rng& rng, size_t max_len) {
  const int ops = 1 + static_cast<int>(rng.Below(4));
  for (int i = 0; i < ops; ++i) {
    const size_t n = b->size();
    switch (rng.Below(9)) {
      case 0:  // flip one bit
        if (n) (*b)[rng.Below(n)] ^= static_cast<uint8_t>(1u << rng.Below(8));
        break;
      case 1:  // set one byte to an interesting or random value
        if (n) (*b)[rng.Below(n)] = rng.Below(2) ? kInterestingBytes[rng.Below(sizeof(kInterestingBytes))]
                                                 : static_cast<uint8_t>(rng.Next());
        break;
      case 2: {  // insert 1..8 random bytes
        const size_t at = rng.Below(n + 1), k = 1 + rng.Below(8);
        Bytes ins(k);
        for (auto& x : ins) x = static_cast<uint8_t>(rng.Next());
        b->insert(b->begin() + static_cast<std::ptrdiff_t>(at), ins.begin(), ins.end());
        break;
      }
      case 3: {  // delete 1..16 bytes
        if (!n) break;
        const size_t at = rng.Below(n), k = std::min(n - at, 1 + rng.Below(16));
        b->erase(b->begin() + static_cast<std::ptrdiff_t>(at), b->begin() + static_cast<std::ptrdiff_t>(at + k));
        break;
      }
      case 4:  // truncate
        b->resize(rng.Below(n + 1));
        break;
      case 5: {  // copy a range elsewhere (repeats structure: headers, array elements)
        if (!n) break;
        const size_t from = rng.Below(n), k = std::min(n - from, 1 + rng.Below(64)), to = rng.Below(n + 1);
        const Bytes piece(b->begin() + static_cast<std::ptrdiff_t>(from), b->begin() + static_cast<std::ptrdiff_t>(from + k));
        b->insert(b->begin() + static_cast<std::ptrdiff_t>(to), piece.begin(), piece.end());
        break;
      }
      case 6: {  // overwrite 1, 2, 4 or 8 bytes with an interesting little-endian integer
        const size_t w = size_t{1} << rng.Below(4);
        if (n < w) break;
        const size_t at = rng.Below(n - w + 1);
        const uint64_t v = kInterestingInts[rng.Below(std::size(kInterestingInts))];
        for (size_t k = 0; k < w; ++k) (*b)[at + k] = static_cast<uint8_t>(v >> (8 * k));
        break;
      }
      case 7: {  // splice: our prefix, another file's suffix
        const Bytes& other = corpus[rng.Below(corpus.size())];
        const size_t cut = rng.Below(n + 1), from = rng.Below(other.size() + 1);
        b->resize(cut);
        b->insert(b->end(), other.begin() + static_cast<std::ptrdiff_t>(from), other.end());
        break;
      }
      case 8: {  // insert an ASCII decimal number (lengths, counts, ids in text formats)
        const std::string num = std::to_string(static_cast<int64_t>(kInterestingInts[rng.Below(std::size(kInterestingInts))]) -
                                               static_cast<int64_t>(rng.Below(2)));
        const size_t at = rng.Below(n + 1);
        b->insert(b->begin() + static_cast<std::ptrdiff_t>(at), num.begin(), num.end());
        break;
      }
    }
  }
  if (b->size() > max_len) b->resize(max_len);
}

bool ReadFile(const std::filesystem::path& p, Bytes* out) {
  std::ifstream f(p, std::ios::binary);
  if (!f) return false;
  out->assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  return true;
}

void Run(const Bytes& b) {
  g_input = b.data();
  g_input_size = b.size();
  LLVMFuzzerTestOneInput(b.data(), b.size());
  g_input = nullptr;
}

int Usage(const char* argv0) {
  std::fprintf(stderr, "usage: %s [--mutations N] [--seed S] [--max-len BYTES] [--max-seconds T] PATH...\n", argv0);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t mutations = 1000, seed = 1;
  size_t max_len = 1 << 20;
  double max_seconds = 0;
  std::vector<std::filesystem::path> paths;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    if (a == "--mutations" || a == "--seed" || a == "--max-len" || a == "--max-seconds") {
      const char* v = value();
      if (!v) return Usage(argv[0]);
      if (a == "--mutations") mutations = std::strtoull(v, nullptr, 10);
      if (a == "--seed") seed = std::strtoull(v, nullptr, 10);
      if (a == "--max-len") max_len = std::strtoull(v, nullptr, 10);
      if (a == "--max-seconds") max_seconds = std::strtod(v, nullptr);
    } else if (a.rfind("--", 0) == 0) {
      return Usage(argv[0]);
    } else {
      paths.emplace_back(a);
    }
  }
  const std::string name = std::filesystem::path(argv[0]).filename().string();
  std::snprintf(g_crash_path, sizeof(g_crash_path), "crash-%s-input", name.c_str());
  for (int sig : {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL}) std::signal(sig, OnCrash);
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);

  std::vector<std::filesystem::path> files;
  for (const auto& p : paths) {
    if (std::filesystem::is_directory(p)) {
      for (const auto& e : std::filesystem::recursive_directory_iterator(p))
        if (e.is_regular_file()) files.push_back(e.path());
    } else {
      files.push_back(p);
    }
  }
  std::sort(files.begin(), files.end());
  std::vector<Bytes> corpus;
  for (const auto& f : files) {
    Bytes b;
    if (!ReadFile(f, &b)) {
      std::fprintf(stderr, "%s: cannot read %s\n", name.c_str(), f.c_str());
      return 2;
    }
    corpus.push_back(std::move(b));
  }
  if (corpus.empty()) corpus.emplace_back();  // still run the empty input and mutations of it

  const auto t0 = std::chrono::steady_clock::now();
  for (const Bytes& b : corpus) Run(b);
  Rng rng(seed);
  uint64_t done = 0;
  for (; done < mutations; ++done) {
    if (max_seconds > 0 && (done & 63) == 0 &&
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > max_seconds) {
      break;
    }
    Bytes b = corpus[rng.Below(corpus.size())];
    Mutate(&b, corpus, rng, max_len);
    Run(b);
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%s: %zu corpus inputs + %llu mutations (seed %llu) in %.2f s, no failure\n", name.c_str(), corpus.size(),
              static_cast<unsigned long long>(done), static_cast<unsigned long long>(seed), secs);
  return 0;
}
