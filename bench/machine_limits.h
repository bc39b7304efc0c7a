// This machine's limits, measured on the threads the engine uses: STREAM-triad memory bandwidth over
// buffers far larger than the caches, and peak fp32 FMA throughput with a register-blocked kernel.
#pragma once

#include <cstdint>

namespace ds41 {

class ThreadPool;

// Bytes per second of a[i] = b[i] + s * c[i] (3 arrays x 4 bytes counted per element), best of runs.
double MeasureTriadBandwidth(ThreadPool* pool, int64_t elements_per_array, int runs);

// FLOP/s (2 per FMA) of independent FMA chains on every thread, best of runs.
double MeasurePeakFmaFlops(ThreadPool* pool, int runs);

const char* PeakKernelTarget();

// FLOP/s (2 per multiply-add) of independent VDPBF16PS chains on every thread (the rate the Lin8
// kernels can reach on CPUs with AVX512-BF16), best of runs; 0 where the CPU lacks it.
double MeasurePeakBf16DotFlops(ThreadPool* pool, int runs);

}  // namespace ds41
