// This machine's limits, measured on the threads the engine uses, with code as good as the host
// allows (runtime-dispatched widest vectors, every thread of the pool), so that every ratio the
// benchmarks print is to an honest ceiling: memory bandwidth over buffers far larger than the caches,
// and the peak of every arithmetic unit the CPU has. bench/limits_vs_stream.sh checks the bandwidth
// against a STREAM build with -march=native and OpenMP.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ds41 {

class ThreadPool;

// Bytes per second of a[i] = b[i] + s * c[i] (3 arrays x 4 bytes counted per element, as STREAM
// counts), best of runs, with streaming (non-temporal) stores and with plain ones (which also read
// each line of a before writing it: all the counted bytes are then read), in turn over one set of arrays.
struct TriadBandwidth {
  double streaming = 0, plain = 0;
};
TriadBandwidth MeasureTriadBandwidth(ThreadPool* pool, int64_t elements_per_array, int runs);

// Bytes per second of summing one array (the access a decode step makes of its weights), best of runs.
double MeasureReadBandwidth(ThreadPool* pool, int64_t elements, int runs);

// FLOP/s (2 per FMA) of independent fp32 FMA chains on every thread at the widest vector, best of runs.
double MeasurePeakFmaFlops(ThreadPool* pool, int runs);
const char* PeakKernelTarget();

// FLOP/s (2 per multiply-add) of independent VDPBF16PS chains; 0 where the CPU lacks AVX512-BF16.
double MeasurePeakBf16DotFlops(ThreadPool* pool, int runs);

// OP/s (2 per multiply-add) of the best int8 dot product the CPU has, of VPDPBUSD on zmm (AVX512-VNNI)
// or ymm (AVX-VNNI) and AVX2's VPMADDUBSW + VPMADDWD (llama.cpp's route). Names the unit in *unit.
double MeasurePeakInt8DotOps(ThreadPool* pool, int runs, std::string* unit);

// AMX tiles: whether the CPU has AMX-BF16 and AMX-INT8 and the OS grants the tile state to this
// process (requested here once); their peaks in FLOP/s (TDPBF16PS) and OP/s (TDPBSSD), 0 without.
bool AmxAvailable();
double MeasurePeakAmxBf16Flops(ThreadPool* pool, int runs);
double MeasurePeakAmxInt8Ops(ThreadPool* pool, int runs);

// Every limit at once, and the figures ratios are taken against.
struct MachineLimits {
  double read_bytes_per_s = 0, triad_stream_bytes_per_s = 0, triad_plain_bytes_per_s = 0;
  double fma_flops = 0, bf16_dot_flops = 0, int8_dot_ops = 0, amx_bf16_flops = 0, amx_int8_ops = 0;
  std::string int8_unit;

  double triad_bytes_per_s() const;  // the better triad
  // The honest bandwidth for reading (a decode step reads its weights and writes next to nothing): the
  // most bytes per second seen read: alone, as the streaming triad's two read streams (2/3 of its
  // bytes), or as the plain triad's three (b, c and the lines of a it reads before writing).
  double read_bandwidth() const;
  // The fastest matrix unit, and its name ("none" when nothing was measured). The int8 and AMX units
  // are ceilings the fp32 kernels cannot reach without changing the numerics (docs/numerics.md).
  double matrix_peak() const;
  std::string matrix_unit() const;
  // One line per limit, for a benchmark's header.
  std::string Describe() const;
};

MachineLimits MeasureMachineLimits(ThreadPool* pool, int64_t bandwidth_bytes, int runs);

// The peak loops' arithmetic, for tests: what one thread's loop returns after `iters` iterations, so
// a test can check each loop computes what its instruction is counted for. That the compiler kept
// one instruction per chain and step, and no spills, is checked in the disassembly
// (bench/check_peak_loops.py, ctest machine_limits_loops): a value cannot show it.
float FmaLoopForTest(int64_t iters);
void TriadForTest(float* a, const float* b, const float* c, float s, int64_t n, bool stream);
float SumForTest(const float* x, int64_t n);
struct Int8LoopResult {
  std::string unit;
  int chains;
  int64_t value;  // chains * 4 * 3 * -2 * iters for the test's operands (3, -2)
};
std::vector<Int8LoopResult> Int8DotLoopsForTest(int64_t iters);  // every unit the CPU has
float Bf16DotLoopForTest(int64_t iters);    // 0 without AVX512-BF16

// One 16x16 tile product each way, for tests (false without AMX): c (16x16, row-major) = a (16xK) * b
// (Kx16), K = 32 bf16 (as raw bits) or 64 int8, through TDPBF16PS or TDPBSSD.
bool AmxBf16TileProduct(const uint16_t* a, const uint16_t* b, float* c);
bool AmxInt8TileProduct(const int8_t* a, const int8_t* b, int32_t* c);

}  // namespace ds41
