// matmul_bench: the routed experts' FP4 matmul alone, per kernel, against this machine's matrix
// peaks (issue: engine speed, prefill on the matrix units). MatMulFp4 at the release's expert shapes
// (2304 x 5120 gate/up and 5120 x 2304 down, --experts distinct matrices of each so the weights come
// from memory as in a prefill) for each activation row count, in three kernels, alternating within
// every round:
//   canonical       the canonical numerics on the kernels ChooseMatmulKernels picks (FMA or VDPBF16PS)
//   grid VPDPWSSD   the FP4 grid numerics on the AVX-512 integer kernel (engine/kernels/matmul_grid.h)
//   grid AMX        the FP4 grid on AMX tiles (from grid::kAmxMinRows rows, where the CPU and OS allow it)
// Each figure is the median GFLOP/s of the rounds with its range (2 FLOPs per multiply-add), with
// the grid kernels' ratio to the canonical one and each kernel's share of its unit's peak measured in
// the same run: fp32 FMA or VDPBF16PS (whichever the canonical blocks run on), TDPBF16PS for AMX, and
// for the integer kernel the int8 dot peak (VPDPBUSD; its VPDPWSSD does half the multiply-adds per
// instruction, so 0.5 of that peak is its own). The grid kernels give the same bits.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <thread>

#include "bench/machine_limits.h"
#include "engine/kernels/kernels.h"
#include "engine/kernels/matmul.h"
#include "engine/kernels/matmul_bf16_dot.h"
#include "engine/kernels/matmul_grid.h"
#include "tests/support/random_operands.h"
#include "util/thread_pool.h"

namespace {

using namespace ds41;
using Steady = std::chrono::steady_clock;

struct Stats {
  std::vector<double> v;
  double Median() const {
    std::vector<double> s = v;
    std::sort(s.begin(), s.end());
    return s.empty() ? 0 : s[s.size() / 2];
  }
  double Min() const { return v.empty() ? 0 : *std::min_element(v.begin(), v.end()); }
  double Max() const { return v.empty() ? 0 : *std::max_element(v.begin(), v.end()); }
};

enum Kernel { kCanonical, kGridInt, kGridAmx, kKernels };
const char* const kNames[kKernels] = {"canonical", "grid VPDPWSSD", "grid AMX"};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"matmul_bench: the FP4 expert matmul per kernel against this machine's matrix peaks"};
  int threads = static_cast<int>(std::thread::hardware_concurrency()), rounds = 5, experts = 8;
  double min_seconds = 0.3;
  std::vector<int> row_counts = {1, 8, 16, 32, 96, 256};
  app.add_option("--threads", threads, "threads");
  app.add_option("--rounds", rounds, "rounds (medians and ranges are over them)")->check(CLI::Range(1, 99));
  app.add_option("--experts", experts, "distinct matrices of each shape (their bytes far above the caches)");
  app.add_option("--rows", row_counts, "activation row counts, comma separated")->delimiter(',');
  app.add_option("--min-seconds", min_seconds, "least time of one kernel's figure in a round");
  std::vector<std::string> kernels = {"canonical", "int", "amx"};
  app.add_option("--kernels", kernels, "kernels to time, comma separated (canonical, int, amx)")
      ->delimiter(',')
      ->check(CLI::IsMember({"canonical", "int", "amx"}));
  CLI11_PARSE(app, argc, argv);

  ThreadPool pool(threads, ThreadPool::Idle::kSpinThenSleep);
  std::string int8_unit;
  const double fma = MeasurePeakFmaFlops(&pool, 3), bf16_dot = MeasurePeakBf16DotFlops(&pool, 3);
  const double vnni = MeasurePeakInt8DotOps(&pool, 3, &int8_unit);
  const double amx_bf16 = MeasurePeakAmxBf16Flops(&pool, 3), amx_int8 = MeasurePeakAmxInt8Ops(&pool, 3);
  const bool amx = grid::AmxSupported(), integer = grid::KernelSupported();
  const std::string choice = ChooseMatmulKernels(&pool);
  // The canonical kernels for 8+ rows: VDPBF16PS where ChooseMatmulKernels kept it, else FMA.
  const bool dot_blocks = bf16dot::Available();
  const double canonical_peak = dot_blocks ? bf16_dot : fma;
  const char* canonical_unit = dot_blocks ? "VDPBF16PS" : "fp32 FMA";
  std::printf("%d threads; matmul kernels: %s\n", threads, choice.c_str());
  std::printf("peaks: fp32 FMA %.0f GFLOP/s, VDPBF16PS %.0f GFLOP/s, int8 dot %.0f GOP/s (%s), AMX TDPBF16PS %.0f "
              "GFLOP/s and TDPBSSD %.0f GOP/s%s\n",
              fma / 1e9, bf16_dot / 1e9, vnni / 1e9, int8_unit.c_str(), amx_bf16 / 1e9, amx_int8 / 1e9,
              amx ? "" : " (no AMX here)");

  std::mt19937 rng(7);
  std::vector<testing::RandomFp4Weights> mats;
  for (int e = 0; e < experts; ++e) {
    mats.emplace_back(rng, 2304, 5120);
    mats.emplace_back(rng, 5120, 2304);
  }
  double weight_bytes = 0;
  for (const auto& m : mats) weight_bytes += static_cast<double>(m.tiles.size() + m.tile_scales.size());
  std::printf("%d expert matrices of each shape, %.0f MB of weights\n", experts, weight_bytes / 1e6);

  for (int rows : row_counts) {
    const QuantActs up = testing::RandomQuantActs(rng, rows, 5120), down = testing::RandomQuantActs(rng, rows, 2304);
    std::vector<float> y(static_cast<size_t>(rows) * 5120);
    // One pass: every matrix once, as a prefill's experts are each read once per chunk.
    auto pass = [&] {
      for (const auto& m : mats) MatMulFp4(m.k == 5120 ? up : down, m.TileMajor(), y.data(), &pool);
    };
    double flops_per_pass = 0;
    for (const auto& m : mats) flops_per_pass += 2.0 * rows * static_cast<double>(m.n * m.k);
    Stats gflops[kKernels];
    auto wanted = [&](const char* name) { return std::find(kernels.begin(), kernels.end(), name) != kernels.end(); };
    const bool run[kKernels] = {wanted("canonical"), integer && wanted("int"),
                                amx && rows >= grid::kAmxMinRows && wanted("amx")};
    for (int r = 0; r < rounds; ++r)
      for (int i = 0; i < kKernels; ++i) {
        const int k = (i + r) % kKernels;  // alternate which kernel goes first
        if (!run[k]) continue;
        SetFp4Numerics(k == kCanonical ? Fp4Numerics::kCanonical : Fp4Numerics::kGrid);
        grid::SetAmxEnabled(k == kGridAmx);
        pass();  // warm-up
        int passes = 0;
        const auto t0 = Steady::now();
        double t = 0;
        do {
          pass();
          ++passes;
          t = std::chrono::duration<double>(Steady::now() - t0).count();
        } while (t < min_seconds);
        gflops[k].v.push_back(flops_per_pass * passes / t / 1e9);
      }
    std::printf("%4d rows:", rows);
    for (int k = 0; k < kKernels; ++k) {
      if (!run[k]) {
        std::printf("  %s -", kNames[k]);
        continue;
      }
      std::printf("  %s %.1f [%.1f, %.1f] GFLOP/s", kNames[k], gflops[k].Median(), gflops[k].Min(), gflops[k].Max());
      // Each kernel against the peak of the unit it runs on, and the fastest unit the host has.
      const double unit_peak = k == kGridAmx ? amx_bf16 : k == kGridInt ? vnni : canonical_peak;
      std::printf(" (%.3f of %s", gflops[k].Median() * 1e9 / unit_peak,
                  k == kGridAmx ? "TDPBF16PS" : k == kGridInt ? "int8 dot" : canonical_unit);
      if (k != kCanonical && run[kCanonical])
        std::printf(", %.2fx canonical", gflops[k].Median() / gflops[kCanonical].Median());
      std::printf(")");
    }
    if (run[kGridAmx] && run[kGridInt])
      std::printf("  AMX/VPDPWSSD %.2fx", gflops[kGridAmx].Median() / gflops[kGridInt].Median());
    std::printf("\n");
    std::fflush(stdout);
  }
  SetFp4Numerics(Fp4Numerics::kCanonical);
  return 0;
}
