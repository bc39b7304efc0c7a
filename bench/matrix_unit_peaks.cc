// The peaks of the x86 matrix units beyond fp32 FMA (VDPBF16PS, int8 dot products, AMX tiles): each a
// loop of independent chains of one instruction, compiled for its unit and run only where the CPU
// (and, for AMX, the OS) has it.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "bench/machine_limits.h"
#include "util/amx.h"
#include "util/thread_pool.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace ds41 {
namespace {

using Steady = std::chrono::steady_clock;

// Best rate over runs of `loop` on every thread, `ops_per_iter` counted per loop iteration.
template <typename Loop>
double BestRate(ThreadPool* pool, int runs, int64_t iters, double ops_per_iter, Loop loop) {
  double best = 0;
  for (int r = 0; r < runs; ++r) {
    std::vector<double> out(static_cast<size_t>(pool->threads()));
    const auto t0 = Steady::now();
    pool->ParallelFor(pool->threads(), [&](int64_t i) { out[static_cast<size_t>(i)] = static_cast<double>(loop(iters)); });
    const double t = std::chrono::duration<double>(Steady::now() - t0).count();
    best = std::max(best, ops_per_iter * static_cast<double>(iters) * pool->threads() / t);
  }
  return best;
}

#if defined(__x86_64__)
struct CpuUnits {
  bool avx2, avx512bf16, avx512vnni, avxvnni;
};

// CPUID leaf 7's bit for AVX-VNNI (subleaf 1 EAX bit 4), which clang 14's __builtin_cpu_supports
// does not name. (AMX: util/amx.h.)
bool CpuidBit(unsigned subleaf, int reg, int bit) {
  unsigned r[4] = {0, 0, 0, 0};  // eax, ebx, ecx, edx
  if (__get_cpuid_count(7, subleaf, &r[0], &r[1], &r[2], &r[3]) == 0) return false;
  return (r[reg] >> bit) & 1u;
}

const CpuUnits& Cpu() {
  static const CpuUnits units = [] {
    __builtin_cpu_init();
    const bool avx2 = __builtin_cpu_supports("avx2"), avx512 = __builtin_cpu_supports("avx512f");
    constexpr int kEax = 0;
    return CpuUnits{avx2, avx512 && __builtin_cpu_supports("avx512bf16"), avx512 && __builtin_cpu_supports("avx512vnni"),
                    avx2 && CpuidBit(1, kEax, 4)};
  }();
  return units;
}

// The loops below keep each chain in a named register and accumulate in place with one instruction
// of inline asm each: through the intrinsics GCC 12 copies (or spills) the accumulators every
// iteration, and the loop then times those moves too. Every chain starts from its own value j, so
// no two can be merged. bench/check_peak_loops.py checks the loops in the disassembly.
#define DS41_CHAINS8(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)
#define DS41_CHAINS12(X) DS41_CHAINS8(X) X(8) X(9) X(10) X(11)
// A loop's body from its DS41_INIT, DS41_STEP and DS41_SUM: the chains, `iters` steps, their sum in s.
#define DS41_CHAIN_LOOP(CHAINS, T) \
  CHAINS(DS41_INIT)                \
  for (int64_t i = 0; i < iters; ++i) { CHAINS(DS41_STEP) } \
  T s = 0;                         \
  CHAINS(DS41_SUM)

// 12 independent VDPBF16PS chains (32 multiply-adds each per instruction); a and b are bf16 bit
// patterns. Returns the sum over chains of lane 0 less its start.
__attribute__((target("avx512f,avx512bf16"))) float Bf16DotLoop(int64_t iters, uint16_t a_bits, uint16_t b_bits) {
  const __m512bh a = reinterpret_cast<__m512bh>(_mm512_set1_epi16(static_cast<short>(a_bits)));
  const __m512bh b = reinterpret_cast<__m512bh>(_mm512_set1_epi16(static_cast<short>(b_bits)));
#define DS41_INIT(j) __m512 c##j = _mm512_set1_ps(static_cast<float>(j));
#define DS41_STEP(j) asm("vdpbf16ps %2, %1, %0" : "+v"(c##j) : "v"(a), "v"(b));
#define DS41_SUM(j) s += _mm512_cvtss_f32(c##j) - static_cast<float>(j);
  DS41_CHAIN_LOOP(DS41_CHAINS12, float)
#undef DS41_INIT
#undef DS41_STEP
#undef DS41_SUM
  return s;
}

// Lane 0 of an int32 vector, and the int8 loops' sum: each chain's lane 0 less its start j.
__attribute__((target("avx512f"))) inline int32_t Lane0(__m512i v) { return _mm512_cvtsi512_si32(v); }
__attribute__((target("avx2"))) inline int32_t Lane0(__m256i v) { return _mm_cvtsi128_si32(_mm256_castsi256_si128(v)); }
#define DS41_INT_SUM(j) s += Lane0(c##j) - (j);

// Independent int8 dot chains, 4 unsigned x signed byte products summed into each int32 lane per
// step. Each returns the sum over its chains of lane 0 less its start: chains * 4 * a * b * iters.
__attribute__((target("avx512f,avx512vnni"))) int64_t Int8Zmm(int64_t iters, uint8_t av, int8_t bv) {
  const __m512i a = _mm512_set1_epi8(static_cast<char>(av)), b = _mm512_set1_epi8(bv);
#define DS41_INIT(j) __m512i c##j = _mm512_set1_epi32(j);
#define DS41_STEP(j) asm("vpdpbusd %2, %1, %0" : "+v"(c##j) : "v"(a), "v"(b));
#define DS41_SUM DS41_INT_SUM
  DS41_CHAIN_LOOP(DS41_CHAINS12, int64_t)
#undef DS41_INIT
#undef DS41_STEP
#undef DS41_SUM
  return s;
}

__attribute__((target("avx2,avxvnni"))) int64_t Int8AvxVnni(int64_t iters, uint8_t av, int8_t bv) {
  const __m256i a = _mm256_set1_epi8(static_cast<char>(av)), b = _mm256_set1_epi8(bv);
#define DS41_INIT(j) __m256i c##j = _mm256_set1_epi32(j);
#define DS41_STEP(j) asm("%{vex%} vpdpbusd %2, %1, %0" : "+x"(c##j) : "x"(a), "x"(b));
#define DS41_SUM DS41_INT_SUM
  DS41_CHAIN_LOOP(DS41_CHAINS12, int64_t)
#undef DS41_INIT
#undef DS41_STEP
#undef DS41_SUM
  return s;
}

// AVX2 has no int8 dot: VPMADDUBSW (pairs into int16) then VPMADDWD by ones (into int32), as llama.cpp.
// 8 chains: with the operands, the ones and a temporary they fill the 16 ymm registers.
__attribute__((target("avx2"))) int64_t Int8Avx2(int64_t iters, uint8_t av, int8_t bv) {
  const __m256i a = _mm256_set1_epi8(static_cast<char>(av)), b = _mm256_set1_epi8(bv), ones = _mm256_set1_epi16(1);
#define DS41_INIT(j) __m256i c##j = _mm256_set1_epi32(j);
#define DS41_STEP(j)                                                                  \
  {                                                                                   \
    __m256i t;                                                                        \
    asm("vpmaddubsw %[b], %[a], %[t]\n\tvpmaddwd %[ones], %[t], %[t]\n\tvpaddd %[t], %[c], %[c]" \
        : [c] "+x"(c##j), [t] "=&x"(t)                                                \
        : [a] "x"(a), [b] "x"(b), [ones] "x"(ones));                                  \
  }
#define DS41_SUM DS41_INT_SUM
  DS41_CHAIN_LOOP(DS41_CHAINS8, int64_t)
#undef DS41_INIT
#undef DS41_STEP
#undef DS41_SUM
  return s;
}

struct Int8Unit {
  const char* name;
  int64_t (*loop)(int64_t, uint8_t, int8_t);
  int chains, macs_per_step;  // per chain and loop iteration
};

// The units this CPU has, fastest first.
std::vector<Int8Unit> Int8Units() {
  std::vector<Int8Unit> units;
  if (Cpu().avx512vnni) units.push_back({"VPDPBUSD zmm, AVX512-VNNI", Int8Zmm, 12, 64});
  if (Cpu().avxvnni) units.push_back({"VPDPBUSD ymm, AVX-VNNI", Int8AvxVnni, 12, 32});
  if (Cpu().avx2) units.push_back({"VPMADDUBSW+VPMADDWD ymm, AVX2", Int8Avx2, 8, 32});
  return units;
}

// AMX: palette 1, eight 16-row x 64-byte tiles. Tiles 0-3 accumulate, 4-5 hold A, 6-7 hold B.
AmxTileConfig FullTiles() {
  AmxTileConfig cfg;
  for (int t = 0; t < 8; ++t) cfg.Set(t, 16, 64);
  return cfg;
}

// The peak loops' tiles: accumulators 0-3 zeroed, A in 4 and 5, B in 6 and 7. Tile configuration is
// per thread, so each loop loads its own.
__attribute__((target("amx-tile"))) void StartTiles(const void* a, const void* b) {
  const AmxTileConfig cfg = FullTiles();
  DS41_TILE_BARRIER();
  _tile_loadconfig(&cfg);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, a, 64);
  _tile_loadd(5, a, 64);
  _tile_loadd(6, b, 64);
  _tile_loadd(7, b, 64);
}

__attribute__((target("amx-tile"))) void EndTiles(void* c) {
  _tile_stored(0, c, 64);
  _tile_release();
  DS41_TILE_BARRIER();
}

// Four independent accumulator tiles cover TDP*'s latency; each instruction is 16 x 16 x (32 bf16 | 64
// int8) multiply-adds.
__attribute__((target("amx-tile,amx-bf16"))) float AmxBf16Loop(int64_t iters) {
  alignas(64) uint16_t a[16 * 32], b[16 * 32];
  std::fill(a, a + 16 * 32, uint16_t{0x3F80});  // 1.0
  std::fill(b, b + 16 * 32, uint16_t{0x3380});  // 2^-24: the sums stay finite
  alignas(64) float c[16 * 16];
  StartTiles(a, b);
  for (int64_t i = 0; i < iters; ++i) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  EndTiles(c);
  return c[0];
}

__attribute__((target("amx-tile,amx-int8"))) int32_t AmxInt8Loop(int64_t iters) {
  alignas(64) int8_t a[16 * 64], b[16 * 64];
  std::fill(a, a + 16 * 64, int8_t{1});
  std::fill(b, b + 16 * 64, int8_t{1});
  alignas(64) int32_t c[16 * 16];
  StartTiles(a, b);
  for (int64_t i = 0; i < iters; ++i) {
    _tile_dpbssd(0, 4, 6);
    _tile_dpbssd(1, 4, 7);
    _tile_dpbssd(2, 5, 6);
    _tile_dpbssd(3, 5, 7);
  }
  EndTiles(c);
  return c[0];
}

// B (K x 16, row-major) in the tiles' pair/quad-interleaved layout: row k / P holds, for each column
// n, the P consecutive k of that column (P = 2 for bf16, 4 for int8).
template <typename T, int P>
void Interleave(const T* b, T* out) {
  constexpr int K = 64 / static_cast<int>(sizeof(T));
  for (int k = 0; k < K; ++k)
    for (int n = 0; n < 16; ++n) out[(k / P) * 16 * P + n * P + k % P] = b[k * 16 + n];
}

__attribute__((target("amx-tile,amx-bf16"))) void AmxBf16Tile(const uint16_t* a, const uint16_t* b, float* c) {
  alignas(64) uint16_t ta[16 * 32], tb[16 * 32];
  std::memcpy(ta, a, sizeof ta);
  Interleave<uint16_t, 2>(b, tb);
  alignas(64) float tc[16 * 16];
  StartTiles(ta, tb);
  _tile_dpbf16ps(0, 4, 6);
  EndTiles(tc);
  std::memcpy(c, tc, sizeof tc);
}

__attribute__((target("amx-tile,amx-int8"))) void AmxInt8Tile(const int8_t* a, const int8_t* b, int32_t* c) {
  alignas(64) int8_t ta[16 * 64], tb[16 * 64];
  std::memcpy(ta, a, sizeof ta);
  Interleave<int8_t, 4>(b, tb);
  alignas(64) int32_t tc[16 * 16];
  StartTiles(ta, tb);
  _tile_dpbssd(0, 4, 6);
  EndTiles(tc);
  std::memcpy(c, tc, sizeof tc);
}
#endif

constexpr int64_t kIters = 20'000'000;

}  // namespace

#if defined(__x86_64__)
double MeasurePeakBf16DotFlops(ThreadPool* pool, int runs) {
  if (!Cpu().avx512bf16) return 0;
  return BestRate(pool, runs, kIters, 2.0 * 12 * 32, [](int64_t n) { return Bf16DotLoop(n, 0x3F80, 0x3F7F); });
}

float Bf16DotLoopForTest(int64_t iters) {
  return Cpu().avx512bf16 ? Bf16DotLoop(iters, 0x3F80, 0x3F80) : 0.0f;
}

double MeasurePeakInt8DotOps(ThreadPool* pool, int runs, std::string* unit) {
  double best = 0;
  *unit = "none";
  for (const Int8Unit& u : Int8Units()) {
    const double rate =
        BestRate(pool, runs, kIters, 2.0 * u.chains * u.macs_per_step, [&](int64_t n) { return u.loop(n, 1, 1); });
    if (rate > best) {
      best = rate;
      *unit = u.name;
    }
  }
  return best;
}

std::vector<Int8LoopResult> Int8DotLoopsForTest(int64_t iters) {
  std::vector<Int8LoopResult> out;
  for (const Int8Unit& u : Int8Units()) out.push_back({u.name, u.chains, u.loop(iters, 3, -2)});
  return out;
}

bool AmxAvailable() { return AmxGranted(); }

// TDPBF16PS: 16 x 16 x 32 multiply-adds; TDPBSSD: 16 x 16 x 64; four per iteration. Their latency is
// long, so fewer iterations give a stable figure.
double MeasurePeakAmxBf16Flops(ThreadPool* pool, int runs) {
  if (!AmxAvailable()) return 0;
  return BestRate(pool, runs, kIters / 20, 2.0 * 4 * 16 * 16 * 32, AmxBf16Loop);
}

double MeasurePeakAmxInt8Ops(ThreadPool* pool, int runs) {
  if (!AmxAvailable()) return 0;
  return BestRate(pool, runs, kIters / 20, 2.0 * 4 * 16 * 16 * 64, AmxInt8Loop);
}

bool AmxBf16TileProduct(const uint16_t* a, const uint16_t* b, float* c) {
  if (!AmxAvailable()) return false;
  AmxBf16Tile(a, b, c);
  return true;
}

bool AmxInt8TileProduct(const int8_t* a, const int8_t* b, int32_t* c) {
  if (!AmxAvailable()) return false;
  AmxInt8Tile(a, b, c);
  return true;
}
#else
double MeasurePeakBf16DotFlops(ThreadPool*, int) { return 0; }
float Bf16DotLoopForTest(int64_t) { return 0; }
double MeasurePeakInt8DotOps(ThreadPool*, int, std::string* unit) {
  *unit = "none";
  return 0;
}
std::vector<Int8LoopResult> Int8DotLoopsForTest(int64_t) { return {}; }
bool AmxAvailable() { return false; }
double MeasurePeakAmxBf16Flops(ThreadPool*, int) { return 0; }
double MeasurePeakAmxInt8Ops(ThreadPool*, int) { return 0; }
bool AmxBf16TileProduct(const uint16_t*, const uint16_t*, float*) { return false; }
bool AmxInt8TileProduct(const int8_t*, const int8_t*, int32_t*) { return false; }
#endif

}  // namespace ds41
