// unit_key_bench: what hashing costs where the cluster hashes most: the unit keys of a long prompt
// (every lookup, put and prefill chains SHA-256 over the prompt's units, unit/unit_key.h), and
// SHA-256 itself over a large buffer. Medians of --rounds, with their range.
//
//   unit_key_bench [--tokens 131072] [--unit-tokens 64] [--rounds 9]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include <CLI/CLI.hpp>

#include "unit/unit_key.h"
#include "util/sha256.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Spread {
  double median, lo, hi;
};

Spread Of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v.front(), v.back()};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"unit_key_bench: the cost of unit keys and of SHA-256"};
  int tokens = 131072, unit_tokens = 64, rounds = 9;
  app.add_option("--tokens", tokens, "prompt length")->check(CLI::Range(64, 1 << 24));
  app.add_option("--unit-tokens", unit_tokens, "tokens per unit")->check(CLI::Range(1, 4096));
  app.add_option("--rounds", rounds, "rounds")->check(CLI::Range(1, 1000));
  CLI11_PARSE(app, argc, argv);
  std::mt19937 rng(1);
  std::vector<int32_t> prompt(static_cast<size_t>(tokens));
  for (int32_t& t : prompt) t = static_cast<int32_t>(rng() % 129280);
  const ds41::UnitKey root = ds41::NamespaceRoot(ds41::Fingerprint{}, 1, "bench");
  std::vector<double> chain_ms, sha_gbs;
  size_t sink = 0;
  std::vector<uint8_t> big(64 << 20);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(rng());
  for (int r = 0; r < rounds; ++r) {
    auto t0 = Clock::now();
    const std::vector<ds41::UnitKey> keys = ds41::ChainKeys(root, prompt, unit_tokens);
    chain_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    sink += keys.back()[0];
    t0 = Clock::now();
    ds41::Sha256 h;
    h.Update(big.data(), big.size());
    sink += h.Digest()[0];
    sha_gbs.push_back(static_cast<double>(big.size()) / 1e9 / std::chrono::duration<double>(Clock::now() - t0).count());
  }
  const Spread c = Of(chain_ms), s = Of(sha_gbs);
  const double units = static_cast<double>(tokens / unit_tokens);
  std::printf("unit keys of a %d-token prompt (%d-token units): %.3f ms [%.3f, %.3f], %.2f us per unit, %.2f GB/s of tokens\n",
              tokens, unit_tokens, c.median, c.lo, c.hi, c.median * 1000 / units,
              static_cast<double>(tokens) * 4 / 1e6 / c.median);
  std::printf("SHA-256 over 64 MiB: %.2f GB/s [%.2f, %.2f]   (checksum %zu)\n", s.median, s.lo, s.hi, sink % 10);
  return 0;
}
