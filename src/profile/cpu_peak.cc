#include "profile/cpu_peak.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstdint>

#include "core/clock.h"

namespace crucible::profile {
namespace {

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

// 12 independent FMA chains cover latency 4-6 on two pipes.
__attribute__((target("avx2,fma"))) double fma_loop_avx2(int64_t iters) {
  __m256 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_ps(float(i));
  __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it)
    for (int i = 0; i < 12; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
  __m256 s = acc[0];
  for (int i = 1; i < 12; ++i) s = _mm256_add_ps(s, acc[i]);
  float out[8];
  _mm256_storeu_ps(out, s);
  return out[0];
}

__attribute__((target("avx512f"))) double fma_loop_avx512(int64_t iters) {
  __m512 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_ps(float(i));
  __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it)
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
  return _mm512_reduce_add_ps(acc[0]) + _mm512_reduce_add_ps(acc[11]);
}

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

CpuPeak measure_cpu_peak(int threads, double seconds) {
  __builtin_cpu_init();
  CpuPeak p;
  p.threads = threads;
  bool avx512 = __builtin_cpu_supports("avx512f");
  bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  p.isa = avx512 ? "avx512" : avx2 ? "avx2" : "sse2";
  p.lanes = avx512 ? 16 : avx2 ? 8 : 4;
  p.fma_units = 2;
  // Calibrate iteration counts to ~seconds/2 each.
  int64_t clock_iters = 20'000'000;
  double t = timed_parallel(threads, clock_iters, add_chain);
  clock_iters = int64_t(clock_iters * (seconds / 2) / std::max(t, 1e-4));
  t = timed_parallel(threads, clock_iters, add_chain);
  p.clock_ghz = 10.0 * double(clock_iters) / t * 1e-9;
  p.derived_gflops = threads * p.fma_units * p.lanes * 2.0 * p.clock_ghz;
  if (avx512 || avx2) {
    auto loop = avx512 ? fma_loop_avx512 : fma_loop_avx2;
    int64_t iters = 5'000'000;
    double tf = timed_parallel(threads, iters, loop);
    iters = int64_t(iters * (seconds / 2) / std::max(tf, 1e-4));
    tf = timed_parallel(threads, iters, loop);
    p.measured_gflops = threads * double(iters) * 12 * p.lanes * 2 / tf * 1e-9;
  }
  return p;
}

}  // namespace crucible::profile
