#include "profile/cpu_peak.h"

#include <cpuid.h>
#include <immintrin.h>
#include <omp.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <x86intrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "core/clock.h"

namespace crucible::profile {

// 10 dependent imuls per iteration: 30 cycles per iteration on any x86 core
// (imul r64, r64 has a latency of 3 cycles on Intel since Core 2 and on AMD
// Zen 1-5). No renamer folds a multiply.
int64_t clock_chain(int64_t iters) {
  int64_t x = 1;
  const int64_t m = 3;
  for (int64_t i = 0; i < iters; ++i) {
    asm volatile(
        "imul %1, %0\n\timul %1, %0\n\timul %1, %0\n\timul %1, %0\n\timul %1, %0\n\t"
        "imul %1, %0\n\timul %1, %0\n\timul %1, %0\n\timul %1, %0\n\timul %1, %0"
        : "+r"(x)
        : "r"(m));
  }
  return x;
}

// 10 dependent register-register adds per iteration.
int64_t add_chain(int64_t iters) {
  int64_t x = 0;
  const int64_t one = 1;
  for (int64_t i = 0; i < iters; ++i) {
    asm volatile(
        "add %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\t"
        "add %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\tadd %1, %0"
        : "+r"(x)
        : "r"(one));
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

// AMX: the tile configuration of palette 1 (64 bytes, Intel SDM vol. 1 ch. 18).
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// Four independent tdpbf16ps accumulators (tmm0-3) over sources held in
// tmm4-7, no memory traffic in the loop: the matrix unit's own rate. Each
// tdpbf16ps of full tiles is C(16x16 f32) += A(16x32 bf16) B(32x16 bf16):
// 16*16*32 multiply-adds.
constexpr double kAmxFlopsPerIter = 4.0 * 16 * 16 * 32 * 2;

__attribute__((target("amx-tile,amx-bf16"))) double amx_loop(int64_t iters) {
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) cfg.colsb[t] = 64, cfg.rows[t] = 16;
  alignas(64) uint16_t src[16 * 32];
  for (int i = 0; i < 16 * 32; ++i) src[i] = 0x3c00 + uint16_t(i % 7);  // small bf16 values
  alignas(64) float out[16 * 16];
  _tile_loadconfig(&cfg);
  _tile_loadd(4, src, 64);
  _tile_loadd(5, src, 64);
  _tile_loadd(6, src, 64);
  _tile_loadd(7, src, 64);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (int64_t it = 0; it < iters; ++it) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, out, 64);
  _tile_release();
  return out[0];
}

double amx_loop_counted(int64_t iters) { return amx_loop(iters); }

// Runs fn(iters) on every thread at once. Each thread's rate is timed on its
// own CPU clock (CLOCK_THREAD_CPUTIME_ID), not the wall clock: a thread that
// other processes keep off its core for part of the window still reads the
// core's speed, which is what a ceiling is (a wall-clock chain read 0.7 GHz
// on a 3.6 GHz core beside a parallel build). The wall clock says how much
// of the window the threads had (`cpu_share`: the slowest thread's CPU time /
// wall time), for the load warning.
struct ParallelRate {
  double iters_per_s = 0;  // summed over threads
  double cpu_share = 1;    // min over threads of cpu time / wall time
};

template <typename F>
ParallelRate parallel_rate(int threads, int64_t iters, F fn) {
  double rate = 0, share = 1;
  volatile double sink = 0;
#pragma omp parallel num_threads(threads) reduction(+ : rate) reduction(min : share)
  {
    fn(iters / 8);  // warm up: clocks ramp, code paged in
#pragma omp barrier
    const int64_t w0 = now_ns(), c0 = thread_cpu_ns();
    sink = sink + double(fn(iters));
    const double cpu = double(std::max<int64_t>(thread_cpu_ns() - c0, 1)) * 1e-9;
    const double wall = double(std::max<int64_t>(now_ns() - w0, 1)) * 1e-9;
    rate = double(iters) / cpu;
    share = std::min(1.0, cpu / wall);
  }
  return {rate, share};
}

double read_khz_file(const char* path) {
  std::ifstream in(path);
  double khz = 0;
  return in >> khz ? khz : 0;
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

bool amx_bf16_usable() {
  static const bool usable = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    const bool amx_bf16 = (d >> 22) & 1, amx_tile = (d >> 24) & 1;
    if (!amx_bf16 || !amx_tile) return false;
    // Linux hands out the 8 KiB tile state only on request
    // (ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA); without it the first
    // tile instruction faults.
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  return usable;
}

double reported_max_ghz() {
  if (double khz = read_khz_file("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq"); khz > 0)
    return khz * 1e-6;
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid_max(0, nullptr) >= 0x16) {
    __cpuid(0x16, a, b, c, d);
    if (b > 0) return b * 1e-3;  // EBX: maximum frequency in MHz
  }
  return 0;
}

double reported_base_ghz() {
  // The TSC ticks at the nominal (base) rate on every CPU with an invariant
  // TSC, virtual machines included: 10 ms against the monotonic clock.
  const int64_t t0 = now_ns();
  const uint64_t c0 = __rdtsc();
  while (now_ns() - t0 < 10'000'000) {
  }
  const double tsc = double(__rdtsc() - c0) / double(now_ns() - t0);
  if (tsc > 0.2 && tsc < kMaxPlausibleClockGhz) return tsc;
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0) {
      const auto at = line.find(" @ ");
      return at == std::string::npos ? 0 : std::atof(line.c_str() + at + 3);
    }
  return 0;
}

double clock_upper_bound(const PeakReadings& r) {
  double hi = kMaxPlausibleClockGhz;
  // Turbo above the maximum the machine reports is not possible; above 2.2x
  // its base rate no server part goes (the widest seen is ~1.9x).
  if (r.reported_max_ghz > 0) hi = std::min(hi, 1.1 * r.reported_max_ghz);
  else if (r.reported_base_ghz > 0) hi = std::min(hi, 2.2 * r.reported_base_ghz);
  return hi;
}

CpuPeak derive_peak(const PeakReadings& r) {
  CpuPeak p;
  p.readings = r;
  p.isa = r.isa;
  p.lanes = r.lanes;
  p.threads = r.threads;
  p.measured_gflops = r.fma_gflops;
  p.amx_gflops = r.amx_gflops;
  char line[256];
  const double lo = 0.4, hi = clock_upper_bound(r);
  bool clock_ok = r.imul_clock_ghz >= lo && r.imul_clock_ghz <= hi;
  if (clock_ok) {
    p.clock_ghz = r.imul_clock_ghz;
    p.clock_source = "imul chain";
  } else {
    std::snprintf(line, sizeof line, "measured clock %.2f GHz is outside [%.1f, %.2f] GHz", r.imul_clock_ghz, lo, hi);
    p.notes.push_back(line);
    if (r.reported_max_ghz > 0) {
      p.clock_ghz = r.reported_max_ghz, p.clock_source = "reported maximum (measured clock out of bounds)";
    } else if (r.reported_base_ghz > 0) {
      p.clock_ghz = r.reported_base_ghz, p.clock_source = "reported base (measured clock out of bounds)";
    } else {
      p.clock_ghz = std::clamp(r.imul_clock_ghz, lo, kMaxPlausibleClockGhz);
      p.clock_source = "measured, out of bounds";
    }
  }
  if (clock_ok && r.add_clock_ghz > 1.15 * p.clock_ghz) {
    std::snprintf(line, sizeof line,
                  "a dependent register add chain ran %.2f adds per cycle (not one): this core "
                  "executes dependent adds faster than their latency; the imul chain sets the clock",
                  r.add_clock_ghz / p.clock_ghz);
    p.notes.push_back(line);
  }
  const double per_cycle = double(r.threads) * r.lanes * 2 * p.clock_ghz;
  p.fma_units = r.fma_gflops > 0 && per_cycle > 0
                    ? std::clamp(int(std::lround(r.fma_gflops / per_cycle)), 1, 2)
                    : 2;
  p.derived_gflops = p.fma_units * per_cycle;
  // A ceiling below a measurement is a wrong ceiling: the loop's rate then
  // stands (the clock read low, e.g. a neighbour slowed its windows).
  if (r.fma_gflops > 1.05 * p.derived_gflops) {
    std::snprintf(line, sizeof line,
                  "the FMA loop ran %.0f GFLOP/s, above the derived peak %.0f: the peak is the loop's",
                  r.fma_gflops, p.derived_gflops);
    p.notes.push_back(line);
    p.derived_gflops = r.fma_gflops;
  }
  // AMX-BF16 does 1024 bf16 FLOPs per cycle per core: more measured than that
  // means the clock or the loop is wrong.
  if (r.amx_gflops > 1.1 * 1024 * p.clock_ghz * r.threads) {
    std::snprintf(line, sizeof line, "the AMX loop ran %.0f GFLOP/s, above 1024 FLOPs per cycle per thread",
                  r.amx_gflops);
    p.notes.push_back(line);
    clock_ok = false;
  }
  p.plausible = clock_ok;
  if (r.cpu_share < 0.9) {
    std::snprintf(line, sizeof line, "other processes held the cores for %.0f%% of a window: rates are per CPU-second",
                  100 * (1 - r.cpu_share));
    p.notes.push_back(line);
  }
  return p;
}

double precision_peak_gflops(const CpuPeak& p, bool bf16, bool bf16_native) {
  if (!bf16) return p.derived_gflops;
  const double vector = p.derived_gflops * (bf16_native ? 2 : 1);
  return std::max(vector, p.amx_gflops);
}

double honest_mfu(double achieved_gflops, double peak_gflops, bool plausible) {
  if (!plausible || !(peak_gflops > 0) || !std::isfinite(achieved_gflops)) return NAN;
  const double m = achieved_gflops / peak_gflops;
  return m <= 1.0 ? m : NAN;
}

std::string format_mfu(double mfu) {
  if (!std::isfinite(mfu)) return "n/a";
  char b[32];
  std::snprintf(b, sizeof b, "%.1f%%", 100 * mfu);
  return b;
}

CpuPeak measure_cpu_peak(int threads, double seconds) {
  __builtin_cpu_init();
  PeakReadings r;
  r.threads = threads;
  const bool avx512 = __builtin_cpu_supports("avx512f");
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const bool amx = amx_bf16_usable();
  r.isa = avx512 ? "avx512" : avx2 ? "avx2" : "sse2";
  r.lanes = avx512 ? 16 : avx2 ? 8 : 4;
  r.reported_max_ghz = reported_max_ghz();
  r.reported_base_ghz = reported_base_ghz();
  // Each figure is the best of kRounds interleaved measurements: on a shared
  // VM a neighbour can only slow a window down (a single 0.3 s window read the
  // clock at 2.7 GHz on a 3.6 GHz core, which put a step's MFU at 96%).
  // Iteration counts are calibrated to ~seconds / (loops x kRounds) each.
  constexpr int kRounds = 3;
  const int loops = 3 + (amx ? 1 : 0);
  const double window = seconds / (loops * kRounds);
  auto fma = avx512 ? fma_loop_avx512 : fma_loop_avx2;
  const bool has_fma = avx512 || avx2;
  auto calibrate = [&](int64_t iters, auto fn) {
    const double rate = parallel_rate(threads, iters, fn).iters_per_s / threads;
    return std::max<int64_t>(1, int64_t(rate * window));
  };
  const int64_t clock_iters = calibrate(2'000'000, clock_chain);
  const int64_t add_iters = calibrate(5'000'000, add_chain);
  const int64_t fma_iters = has_fma ? calibrate(2'000'000, fma) : 0;
  const int64_t amx_iters = amx ? calibrate(200'000, amx_loop_counted) : 0;
  CpuPeak p;
  // Out of bounds (a preempted window, a migrating vCPU): measured again,
  // twice at most, before the reported maximum stands in.
  for (int attempt = 0; attempt < 3; ++attempt) {
    double rc = 0, ra = 0, rf = 0, rx = 0, share = 1;
    auto best = [&](double* r, int64_t iters, auto fn) {
      const ParallelRate m = parallel_rate(threads, iters, fn);
      *r = std::max(*r, m.iters_per_s);
      share = std::min(share, m.cpu_share);
    };
    for (int round = 0; round < kRounds; ++round) {
      best(&rc, clock_iters, clock_chain);
      best(&ra, add_iters, add_chain);
      if (has_fma) best(&rf, fma_iters, fma);
      if (amx) best(&rx, amx_iters, amx_loop_counted);
    }
    r.imul_clock_ghz = double(kClockChainCycles) * rc / threads * 1e-9;
    r.add_clock_ghz = 10.0 * ra / threads * 1e-9;
    r.fma_gflops = has_fma ? fma_loop_flops(1) * rf * 1e-9 : 0;
    r.amx_gflops = amx ? kAmxFlopsPerIter * rx * 1e-9 : 0;
    r.cpu_share = share;
    p = derive_peak(r);
    if (p.plausible) break;
  }
  return p;
}

}  // namespace crucible::profile
