#include "profile/cpu_peak.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/clock.h"

namespace crucible::profile {

// 10 dependent adds per iteration: 10 cycles per iteration on any x86 core.
int64_t add_chain(int64_t iters) {
  int64_t x = 0;
  for (int64_t i = 0; i < iters; ++i) {
    asm volatile(
        "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\t"
        "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0"
        : "+r"(x));
  }
  return x;
}

namespace {

// 12 independent FMA chains cover latency 4-6 on two pipes. Twelve named
// accumulators, not an array: GCC kept an array in memory, and a
// store-to-load round trip per FMA measured a fifth of the peak.
#define CRUCIBLE_FMA12(FMA, acc, a, b)                                             \
  acc##0 = FMA(acc##0, a, b), acc##1 = FMA(acc##1, a, b), acc##2 = FMA(acc##2, a, b), \
  acc##3 = FMA(acc##3, a, b), acc##4 = FMA(acc##4, a, b), acc##5 = FMA(acc##5, a, b), \
  acc##6 = FMA(acc##6, a, b), acc##7 = FMA(acc##7, a, b), acc##8 = FMA(acc##8, a, b), \
  acc##9 = FMA(acc##9, a, b), acc##10 = FMA(acc##10, a, b), acc##11 = FMA(acc##11, a, b)

__attribute__((target("avx2,fma"))) double fma_loop_avx2(int64_t iters) {
  __m256 x0 = _mm256_set1_ps(0), x1 = _mm256_set1_ps(1), x2 = _mm256_set1_ps(2),
         x3 = _mm256_set1_ps(3), x4 = _mm256_set1_ps(4), x5 = _mm256_set1_ps(5),
         x6 = _mm256_set1_ps(6), x7 = _mm256_set1_ps(7), x8 = _mm256_set1_ps(8),
         x9 = _mm256_set1_ps(9), x10 = _mm256_set1_ps(10), x11 = _mm256_set1_ps(11);
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it) CRUCIBLE_FMA12(_mm256_fmadd_ps, x, a, b);
  __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(x0, x1), _mm256_add_ps(x2, x3)),
                           _mm256_add_ps(_mm256_add_ps(x4, x5), _mm256_add_ps(x6, x7)));
  s = _mm256_add_ps(s, _mm256_add_ps(_mm256_add_ps(x8, x9), _mm256_add_ps(x10, x11)));
  float out[8];
  _mm256_storeu_ps(out, s);
  return out[0];
}

__attribute__((target("avx512f"))) double fma_loop_avx512(int64_t iters) {
  __m512 x0 = _mm512_set1_ps(0), x1 = _mm512_set1_ps(1), x2 = _mm512_set1_ps(2),
         x3 = _mm512_set1_ps(3), x4 = _mm512_set1_ps(4), x5 = _mm512_set1_ps(5),
         x6 = _mm512_set1_ps(6), x7 = _mm512_set1_ps(7), x8 = _mm512_set1_ps(8),
         x9 = _mm512_set1_ps(9), x10 = _mm512_set1_ps(10), x11 = _mm512_set1_ps(11);
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it) CRUCIBLE_FMA12(_mm512_fmadd_ps, x, a, b);
  __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(x0, x1), _mm512_add_ps(x2, x3)),
                           _mm512_add_ps(_mm512_add_ps(x4, x5), _mm512_add_ps(x6, x7)));
  s = _mm512_add_ps(s, _mm512_add_ps(_mm512_add_ps(x8, x9), _mm512_add_ps(x10, x11)));
  // As the AVX2 loop: one lane keeps the loop alive (GCC 12's
  // _mm512_reduce_add_ps warns of an uninitialised register in its header).
  float out[16];
  _mm512_storeu_ps(out, s);
  return out[0];
}
#undef CRUCIBLE_FMA12

// Runs fn(iters) on every thread at once; returns seconds of the slowest thread.
template <typename F>
double timed_parallel(int threads, int64_t iters, F fn) {
  double worst = 0;
  volatile double sink = 0;
#pragma omp parallel num_threads(threads) reduction(max : worst)
  {
    fn(iters / 8);  // warm up: clocks ramp, code paged in
#pragma omp barrier
    int64_t t0 = now_ns();
    sink = sink + double(fn(iters));
    worst = double(now_ns() - t0) * 1e-9;
  }
  return worst;
}

}  // namespace

FmaLoop fma_loop() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return fma_loop_avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return fma_loop_avx2;
  return nullptr;
}

double fma_loop_flops(int64_t iters) {
  __builtin_cpu_init();
  const int lanes = __builtin_cpu_supports("avx512f") ? 16 : 8;
  return double(iters) * 12 * lanes * 2;
}

int fma_pipes_from_loop(double measured_gflops, int threads, int lanes, double clock_ghz) {
  const double per_cycle_flops = double(threads) * lanes * 2 * clock_ghz;
  if (!(measured_gflops > 0) || !(per_cycle_flops > 0)) return 2;
  return std::clamp(int(std::lround(measured_gflops / per_cycle_flops)), 1, 2);
}

CpuPeak measure_cpu_peak(int threads, double seconds) {
  __builtin_cpu_init();
  CpuPeak p;
  p.threads = threads;
  bool avx512 = __builtin_cpu_supports("avx512f");
  bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  p.isa = avx512 ? "avx512" : avx2 ? "avx2" : "sse2";
  p.lanes = avx512 ? 16 : avx2 ? 8 : 4;
  // Each figure is the best of kRounds interleaved measurements: on a shared
  // VM a neighbour can only slow a window down (a single 0.3 s window read the
  // clock at 2.7 GHz on a 3.6 GHz core, which put a step's MFU at 96%).
  // Iteration counts are calibrated to ~seconds / (2 kRounds) each.
  constexpr int kRounds = 3;
  const double window = seconds / (2 * kRounds);
  auto loop = avx512 ? fma_loop_avx512 : fma_loop_avx2;
  const bool has_loop = avx512 || avx2;
  int64_t clock_iters = 20'000'000, iters = 5'000'000;
  clock_iters = int64_t(clock_iters * window /
                        std::max(timed_parallel(threads, clock_iters, add_chain), 1e-4));
  if (has_loop)
    iters = int64_t(iters * window / std::max(timed_parallel(threads, iters, loop), 1e-4));
  double t = INFINITY, tf = INFINITY;
  for (int round = 0; round < kRounds; ++round) {
    t = std::min(t, timed_parallel(threads, clock_iters, add_chain));
    if (has_loop) tf = std::min(tf, timed_parallel(threads, iters, loop));
  }
  p.clock_ghz = 10.0 * double(clock_iters) / t * 1e-9;
  if (has_loop) p.measured_gflops = threads * double(iters) * 12 * p.lanes * 2 / tf * 1e-9;
  p.fma_units = fma_pipes_from_loop(p.measured_gflops, threads, p.lanes, p.clock_ghz);
  p.derived_gflops = threads * p.fma_units * p.lanes * 2.0 * p.clock_ghz;
  return p;
}

}  // namespace crucible::profile
