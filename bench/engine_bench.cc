// engine_bench: the engine against this machine's limits, in one run (issue: engine speed).
//
// Measures this machine's limits on the engine's threads (bench/machine_limits.h: the read bandwidth,
// and the peak of every arithmetic unit the CPU has), then on a checkpoint (use bench/slice_config.sh
// for the real-width slice):
//   decode, batch 1      weight bytes read per token / time, against the read bandwidth
//   prefill              useful FLOPs (2 per multiply-add of every matmul and attention product) / time,
//                        against the fastest matrix unit's peak (and the fp32 FMA peak, the unit the
//                        kernels use today)
//   batched decode       tokens/s with 1, 8 and 32 concurrent sequences, and the weight bytes a step
//                        reads (more sequences route to more experts) against the read bandwidth;
//                        each batch's ceiling here (its bytes at the read bandwidth or its FLOPs at
//                        the fastest matrix peak, whichever takes longer) says how far batching can go
//   CED vs exact prefill time ratio for the same prompt (arithmetic: about 0.5 + window / N)
//   verification (a checkpoint with DSpark layers, e.g. ds41-ckpt --preset tiny-dspark): the cost of
//                        verifying k = 1..block drafted tokens at each batch size relative to a plain
//                        decode step (the curve decoder_node --speculative measures for its
//                        scheduler), and the decode speed-up that curve gives at the paper's example
//                        acceptance profile, labelled derived: random weights accept almost nothing
//   vision (--only vision, a checkpoint with a vision tower: ds41-ckpt --preset tiny-vision, or the
//                        slice, which carries 2 real-width blocks): one image's tower and aligner time at
//                        --vision-grid patches (default: the largest square grid the span cap allows,
//                        93x93 for the release's 1344x1344 plan), ms per block, and useful FLOPs against
//                        the fastest matrix peak
// and the run's peak resident memory against the mapped checkpoint. The matmuls read the tile-major
// weight copy (ds41-tiles.bin, built beside the checkpoint on first use); --weight-tiles off measures
// the row-major kernels.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>

#include <unistd.h>

#include "bench/decode_batch.h"
#include "bench/machine_limits.h"
#include "engine/engine.h"
#include "engine/kernels/kernels.h"
#include "engine/kernels/matmul.h"
#include "engine/kernels/matmul_bf16_dot.h"
#include "engine/kernels/numerics.h"
#include "engine/layers/vision.h"
#include "engine/sampling.h"
#include "engine/speculation.h"
#include "util/malloc_tuning.h"
#include "util/process.h"

namespace {

using namespace ds41;
using Steady = std::chrono::steady_clock;

double Seconds(Steady::time_point t0) { return std::chrono::duration<double>(Steady::now() - t0).count(); }

std::vector<int32_t> Prompt(int n, int vocab, int seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(n);
  for (auto& v : t) v = 3 + static_cast<int32_t>(rng() % (vocab - 3));
  return t;
}

// The peak resident memory (VmHWM) since the last ResetPeakResident, in GiB.
double PeakResidentGiB() { return std::max(0.0, ProcStatus(getpid(), "VmHWM")) / 1048576.0; }

void ResetPeakResident() {
  if (std::FILE* f = std::fopen("/proc/self/clear_refs", "w")) {
    std::fputs("5", f);
    std::fclose(f);
  }
}

void Check(const Status& s) {
  if (!s.ok()) {
    std::fprintf(stderr, "error: %s\n", s.ToString().c_str());
    std::exit(1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  TuneMallocForLargeBuffers();
  CLI::App app{"engine_bench: engine speed as ratios to this machine's measured limits"};
  std::string model_dir;
  int threads = static_cast<int>(std::thread::hardware_concurrency()), prefill = 1024, ced = 2048, steps = 8;
  int64_t limits_mib = 1536;
  app.add_option("--model", model_dir, "checkpoint (bench/slice_config.sh writes the real-width slice)")->required();
  app.add_option("--threads", threads, "engine threads");
  app.add_option("--prefill", prefill, "prefill length");
  int prefill_chunk = 0;
  app.add_option("--prefill-chunk", prefill_chunk,
                 "prefill in calls of this many tokens and print each call's time per token (the cost "
                 "of a token against its position); 0: one call");
  app.add_option("--ced-prompt", ced, "prompt length for CED vs exact");
  app.add_option("--decode-steps", steps, "timed decode steps per figure");
  std::vector<int> batches{1, 8, 32};
  app.add_option("--batches", batches, "concurrent sequences of the batched figure (ratios are to 1, when measured)")
      ->delimiter(',');
  app.add_option("--limits-mib", limits_mib, "MiB of the bandwidth buffers (far above the caches)");
  std::string only = "decode,prefill,batched,ced,verify", tiles = "file";
  app.add_option("--weight-tiles", tiles, "tile-major weight copy: file, memory or off (row-major kernels)");
  app.add_option("--only", only, "figures to measure, comma separated (decode,prefill,batched,ced,verify; vision "
                 "only when named)");
  std::vector<std::string> numerics{Fp4NumericsName(Fp4NumericsInUse())};  // (DS41_FP4_NUMERICS, as the nodes)
  app.add_option("--fp4-numerics", numerics, "FP4 numerics (canonical, grid: engine/kernels/kernels.h; default the "
                 "environment's); decode is measured in each, in turn, and the other figures in the first")
      ->delimiter(',')
      ->check(CLI::IsMember({"canonical", "grid"}));
  std::string vision_grid;
  app.add_option("--vision-grid", vision_grid, "patch grid HxW of the vision figure (default: the largest square within "
                 "the span cap)");
  CLI11_PARSE(app, argc, argv);
  auto want = [&](const char* part) { return ("," + only + ",").find("," + std::string(part) + ",") != std::string::npos; };

  ThreadPool pool(threads, ThreadPool::Idle::kSpinThenSleep);
  auto tiles_mode = ParseWeightTiles(tiles);
  Check(tiles_mode.status());
  auto model_or = Model::Open(model_dir, {*tiles_mode, ""});
  Check(model_or.status());
  const Model& model = **model_or;
  const ModelConfig& c = model.config();
  Engine engine(model, &pool);
  std::printf("inputs: %d threads, SIMD target %s, model %s (%d layers, hidden %d, %d heads x %d, %d experts top-%d, "
              "vocab %d), mapped %.2f GiB, tile-major weights %s\n",
              threads, MatmulTargetName(), model_dir.c_str(), c.n_layers, c.dim, c.n_heads, c.head_dim,
              c.n_routed_experts, c.n_activated_experts, c.vocab_size, model.mapped_bytes() / 1073741824.0,
              model.packed().summary().c_str());

  const MachineLimits limits = MeasureMachineLimits(&pool, limits_mib << 20, 5);
  ResetPeakResident();  // the limits' buffers are freed: the peak printed at the end is the engine's
  const double bw = limits.read_bandwidth(), peak = limits.matrix_peak();
  // The engine's kernels are chosen as the nodes choose them (timed on this machine, same bits).
  std::printf("matmul kernels: %s\n", ChooseMatmulKernels(&pool).c_str());
  std::printf("machine (%d threads, %ld MiB buffers):\n%s\n", threads, static_cast<long>(limits_mib),
              limits.Describe().c_str());
  // Arithmetic ratios are to the fastest unit the host has; the second share is to the unit the
  // chosen kernels run on (VDPBF16PS or fp32 FMA; matmuls of fewer than kMinRows rows have their own).
  const std::string unit = limits.matrix_unit();
  auto of_peak = [&](double flops_per_s, bool few_rows) {
    const bool dot = few_rows ? bf16dot::DecodeAvailable() : bf16dot::Available();
    char buf[200];
    std::snprintf(buf, sizeof buf, "%.3f of the fastest matrix peak (%s; %.3f of %s, the kernels' unit)",
                  flops_per_s / peak, unit.c_str(), flops_per_s / (dot ? limits.bf16_dot_flops : limits.fma_flops),
                  dot ? "VDPBF16PS" : "fp32 FMA");
    return std::string(buf);
  };

  auto use_numerics = [](const std::string& name) {
    SetFp4Numerics(name == "grid" ? Fp4Numerics::kGrid : Fp4Numerics::kCanonical);
  };
  // Decode, batch 1.
  for (const std::string& mode : numerics) {
    if (!want("decode")) break;
    use_numerics(mode);
    SequenceState st = SequenceState::Create(c);
    std::vector<float> lg;
    Check(engine.Prefill(&st, {Prompt(32, c.vocab_size, 1), {}, {}}, false, &lg));
    for (int i = 0; i < 2; ++i) Check(engine.DecodeBatch({&st}, {Argmax(lg.data(), c.vocab_size)}, &lg));
    ResetWorkCounters();
    const auto t0 = Steady::now();
    for (int i = 0; i < steps; ++i) Check(engine.DecodeBatch({&st}, {Argmax(lg.data(), c.vocab_size)}, &lg));
    const double t = Seconds(t0) / steps;
    const WorkCounters w = ReadWorkCounters();
    const double bytes = static_cast<double>(w.weight_bytes) / steps;
    std::printf("decode batch 1 (%s FP4 numerics): %.1f ms/token, %.1f MB of weights read per token -> %.2f GB/s = "
                "%.3f of read bandwidth\n",
                mode.c_str(), t * 1e3, bytes / 1e6, bytes / t / 1e9, bytes / t / bw);
  }
  use_numerics(numerics.front());
  std::printf("FP4 numerics for the figures below: %s%s\n", Fp4NumericsName(Fp4NumericsInUse()),
              Fp4NumericsInUse() == Fp4Numerics::kGrid ? (" (" + Fp4GridKernels() + ")").c_str() : "");
  // Prefill.
  if (want("prefill")) {
    SequenceState st = SequenceState::Create(c);
    std::vector<float> lg;
    const std::vector<int32_t> prompt = Prompt(prefill, c.vocab_size, 2);
    const int chunk = prefill_chunk > 0 ? prefill_chunk : prefill;
    ResetWorkCounters();
    const auto t0 = Steady::now();
    for (int p = 0; p < prefill; p += chunk) {
      const int n = std::min(chunk, prefill - p);
      const auto tc = Steady::now();
      const uint64_t macs0 = ReadWorkCounters().macs;
      Check(engine.Prefill(&st, {std::vector<int32_t>(prompt.begin() + p, prompt.begin() + p + n), {}, {}}, false, &lg));
      // The useful arithmetic per token is exact whatever else runs on the host; the time is not.
      const double chunk_flops = 2.0 * static_cast<double>(ReadWorkCounters().macs - macs0);
      if (prefill_chunk > 0)
        std::printf("prefill chunk [%d, %d): %.3f s, %.3f ms/token, %.1f MFLOP/token useful, %.1f GFLOP/s\n", p, p + n,
                    Seconds(tc), Seconds(tc) * 1e3 / n, chunk_flops / n / 1e6, chunk_flops / Seconds(tc) / 1e9);
    }
    const double t = Seconds(t0);
    const double flops = 2.0 * static_cast<double>(ReadWorkCounters().macs);
    std::printf("prefill %d tokens: %.2f s, %.1f GFLOP useful -> %.1f GFLOP/s = %s\n", prefill, t, flops / 1e9,
                flops / t / 1e9, of_peak(flops / t, false).c_str());
  }
  // Batched decode.
  if (want("batched")) {
    double tps1 = 0;
    for (int batch : batches) {
      auto seqs = DecodeBatch::Create(engine, c, batch, 100);
      Check(seqs.status());
      Check(seqs->Step());  // warm-up
      ResetWorkCounters();
      const auto t0 = Steady::now();
      for (int s = 0; s < steps; ++s) Check(seqs->Step());
      const double secs = Seconds(t0), tps = batch * steps / secs;
      const WorkCounters wc = ReadWorkCounters();
      const double bytes = static_cast<double>(wc.weight_bytes) / steps, flops = 2.0 * static_cast<double>(wc.macs);
      if (batch == 1) tps1 = tps;
      // More sequences route to more experts (the weight bytes a step reads grow with the batch) and
      // multiply the arithmetic: each line says how close it is to either limit.
      char ratio[48] = "";
      if (tps1 > 0) std::snprintf(ratio, sizeof ratio, " (%.2fx one sequence)", tps / tps1);
      std::printf("batched decode, %2d sequences: %.2f tokens/s%s; %.0f MB of weights per step = "
                  "%.3f of read bandwidth, %.1f GFLOP/s = %s\n",
                  batch, tps, ratio, bytes / 1e6, bytes * steps / secs / bw, flops / secs / 1e9,
                  of_peak(flops / secs, batch < bf16dot::kMinRows).c_str());
      // The machine's own ceiling for this batch (a roofline): a step can take no less than its weight
      // bytes at the read bandwidth, nor its arithmetic at the fastest matrix unit's peak, whichever is
      // longer, even with the two fully overlapped.
      const double step_floor = std::max(bytes / bw, flops / steps / peak);
      char ceiling_ratio[48] = "";
      if (tps1 > 0) std::snprintf(ceiling_ratio, sizeof ceiling_ratio, " = %.2fx one sequence", batch / step_floor / tps1);
      std::printf("  ceiling on this machine: %.2f tokens/s%s (%.1f GFLOP and %.0f MB per step); measured %.3f of it\n",
                  batch / step_floor, ceiling_ratio, flops / steps / 1e9, bytes / 1e6, tps * step_floor / batch);
    }
  }
  // CED against exact prefill of the same prompt.
  if (want("ced")) {
    const auto prompt = Prompt(ced, c.vocab_size, 3);
    SequenceState a = SequenceState::Create(c), b = SequenceState::Create(c);
    std::vector<float> la, lb;
    auto t0 = Steady::now();
    Check(engine.Prefill(&a, {prompt, {}, {}}, false, &la));
    const double te = Seconds(t0);
    t0 = Steady::now();
    Check(engine.CedPrefill(&b, {prompt, {}, {}}, -1, &lb));
    const double tc = Seconds(t0);
    std::printf("prefill of %d tokens: exact %.2f s, CED %.2f s, ratio %.3f (arithmetic ~ %.3f = 0.5 + window/N)\n", ced, te,
                tc, tc / te, 0.5 + static_cast<double>(c.window_size) / ced);
  }
  // Verification cost curve (speculative decoding) and the speed-up it implies.
  if (want("verify") && !c.has_dspark()) {
    std::printf("verify: skipped, the model has no DSpark layers (ds41-ckpt --preset tiny-dspark writes one)\n");
  } else if (want("verify")) {
    const int K = c.dspark_block_size;
    auto curve = MeasureVerifyCost(engine, model, batches, K, /*prompt=*/16, /*repeats=*/steps);
    Check(curve.status());
    std::printf("verify cost relative to a plain decode step at the same batch (k drafted tokens = k + 1 rows per "
                "sequence; best of %d runs; draft = the DSpark pass):\n", steps);
    for (size_t b = 0; b < curve->batches.size(); ++b) {
      std::printf("  batch %2d:", curve->batches[b]);
      for (int k = 1; k <= K; ++k) std::printf("  k=%d %.2f", k, curve->verify[b][static_cast<size_t>(k)]);
      std::printf("  draft %.2f\n", curve->draft[b]);
    }
    // Paper notes C8's example profile; the confidence head of a random checkpoint says nothing.
    const std::vector<double> profile = {0.9, 0.8, 0.6, 0.3, 0.2};
    std::printf("derived, not observed (random weights accept almost no drafts): decode speed-up this curve gives at "
                "the paper's example acceptance profile (0.9, 0.8, 0.6, 0.3, 0.2), tokens per unit time against "
                "plain decode = (1 + sum_i prod_j<=i a_j) / (verify cost + draft cost):\n");
    for (int B : curve->batches) {
      int best_k = 0;
      double best = 1.0;
      std::printf("  batch %2d:", B);
      for (int k = 1; k <= K && k <= static_cast<int>(profile.size()); ++k) {
        const double x = ExpectedTokens(profile, k) / (curve->Verify(k, B) + curve->Draft(B));
        std::printf("  k=%d %.2fx", k, x);
        if (x > best) {
          best = x;
          best_k = k;
        }
      }
      const int chosen = ChooseVerifyLength(std::vector<std::vector<double>>(static_cast<size_t>(B), profile), *curve);
      std::printf("  -> best k=%d, %.2fx (the scheduler, draft already paid, picks k=%d)\n", best_k, best, chosen);
    }
  }
  // Vision tower and aligner: one image.
  if (want("vision") && !c.vision) {
    std::printf("vision: skipped, the model has no vision tower (ds41-ckpt --preset tiny-vision writes one)\n");
  } else if (want("vision")) {
    int gh = 0, gw = 0;
    if (vision_grid.empty()) {  // largest square token grid t with t (t + 1) + 2 <= cap, in patches
      int t = 1;
      while ((t + 1) * (t + 2) + 2 <= c.vision_max_n_token) ++t;
      gh = gw = t * c.vision_downsample_ratio;
    } else if (std::sscanf(vision_grid.c_str(), "%dx%d", &gh, &gw) != 2) {
      Check(InvalidArgumentError("--vision-grid expects HxW"));
    }
    auto grid = VisionGrid(c, gh, gw);
    Check(grid.status());
    const int K = c.vision_patch_inputs();
    std::vector<float> patches(static_cast<size_t>(grid->patches()) * K);
    std::mt19937 rng(5);
    std::normal_distribution<float> nd(0.0f, 0.5f);
    for (float& v : patches) v = RoundBf16(nd(rng));
    std::vector<float> feats, rows;
    VisionTower(model, patches.data(), gh, gw, &feats, &pool);  // warm-up (page faults, packing buffers)
    const int reps = std::max(1, std::min(steps, 3));
    double t_tower = 0, t_align = 0;
    for (int i = 0; i < reps; ++i) {
      auto t0 = Steady::now();
      VisionTower(model, patches.data(), gh, gw, &feats, &pool);
      t_tower += Seconds(t0);
      t0 = Steady::now();
      VisionAligner(model, feats, *grid, &rows, &pool);
      t_align += Seconds(t0);
    }
    t_tower /= reps;
    t_align /= reps;
    const double flops = 2.0 * VisionMacs(c, *grid), t = t_tower + t_align;
    std::printf("vision: %dx%d patches (%lld) -> %dx%d tokens, span %lld; %d blocks of %d (%d heads), patch %d, merge %d: "
                "tower+aligner %.1f ms per image (tower %.1f ms = %.1f ms per block, aligner %.1f ms), %.3g GFLOP useful "
                "-> %.1f GFLOP/s = %s\n",
                gh, gw, static_cast<long long>(grid->patches()), grid->n_h, grid->n_w,
                static_cast<long long>(grid->span_length()), c.vision_n_layers, c.vision_dim, c.vision_n_heads,
                c.vision_patch_size, c.vision_downsample_ratio, t * 1e3, t_tower * 1e3, t_tower * 1e3 / c.vision_n_layers,
                t_align * 1e3, flops / 1e9, flops / t / 1e9, of_peak(flops / t, false).c_str());
  }
  std::printf("peak resident memory %.2f GiB since the engine started (mapped checkpoint %.2f GiB)\n", PeakResidentGiB(),
              model.mapped_bytes() / 1073741824.0);
  return 0;
}
