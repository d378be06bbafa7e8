// The CPU's compute ceilings, derived from what the CPU is and checked
// against what it does:
//   f32:  sustained clock x FMA pipes x vector lanes x 2 FLOPs x threads;
//   bf16: the matrix unit's measured rate where there is one (AMX), else
//         twice the f32 peak where oneDNN has a native bf16 matmul
//         (AVX512_BF16's vdpbf16ps: two products per f32 lane), else f32's.
//
// The clock is a dependent imul chain (3 cycles per imul on every x86 core
// since Core 2 and on AMD Zen 1-5) timed against the monotonic clock on every
// thread at once. It was a dependent `add $1` chain, assumed one add per
// cycle: recent Intel cores run such chains several adds per cycle (their
// renamer folds small immediates), and the probe read 7.7-18.6 GHz there. A
// register-to-register add chain is kept as a cross-check. The clock is then
// held against what the machine reports (the OS's or CPUID's maximum, the
// TSC's base) and against physics (6.5 GHz): outside them it is measured
// again, and if it stays outside, the reported maximum stands in and the
// peak is marked not plausible, so no MFU is printed against it.
//
// The FMA pipe count comes from the FMA loop: its FLOPs / (clock x lanes x 2
// x threads), rounded to 1 or 2 (AMD Zen 4 runs AVX-512 double-pumped: 1; most
// server cores: 2; CPUID does not tell).
//
// derive_peak() is the arithmetic alone, so it is tested against the figures
// of every machine this project has run on (tests/profile/cpu_peak_test.cc).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace crucible::profile {

// The highest clock any x86 core sustains (the fastest desktop parts boost to
// ~6.2 GHz); a measured clock above it is a measurement gone wrong.
inline constexpr double kMaxPlausibleClockGhz = 6.5;

// What the loops measured and what the machine says of itself.
struct PeakReadings {
  std::string isa;           // "avx512" | "avx2" | "sse2"
  int lanes = 0;             // fp32 lanes per vector
  int threads = 1;
  double imul_clock_ghz = 0; // imul chain: imuls per second x 3 cycles / 1e9
  double add_clock_ghz = 0;  // reg-reg add chain: adds per second / 1e9 (0: not run)
  double fma_gflops = 0;     // FMA loop, all threads (0: no FMA loop)
  double amx_gflops = 0;     // AMX tdpbf16ps loop, all threads (0: no AMX)
  double reported_max_ghz = 0;   // cpufreq's or CPUID's maximum (0: unknown)
  double reported_base_ghz = 0;  // the TSC's rate, else the model name's "@ x GHz" (0: unknown)
  // The smallest share of a window a measuring thread had its core (CPU time
  // / wall time): below ~0.9 other processes were running. The rates above
  // are per CPU-second, so they stay the core's own.
  double cpu_share = 1;
};

struct CpuPeak {
  std::string isa;          // widest vector ISA used for the derivation
  int lanes = 0;            // fp32 lanes per vector
  int fma_units = 0;        // full-width FMAs per cycle per core: 1 or 2, from the FMA loop
  int threads = 0;
  double clock_ghz = 0;     // sustained, measured under load on all threads
  std::string clock_source; // "imul chain" or "reported maximum (...)"
  bool plausible = false;   // clock within bounds and the peak not below a measurement
  double derived_gflops = 0;   // threads * fma_units * lanes * 2 * clock
  double measured_gflops = 0;  // FMA loop on all threads
  double amx_gflops = 0;       // AMX loop on all threads (0: none)
  std::vector<std::string> notes;  // what disagreed, one line each
  PeakReadings readings;
};

// The clock bounds for these readings: [0.4 GHz, min(6.5, 1.1 x reported
// maximum, else 2.2 x reported base)].
double clock_upper_bound(const PeakReadings& r);

// The arithmetic: clock, pipes, derived peak, plausibility.
CpuPeak derive_peak(const PeakReadings& r);

// The ceiling MFU counts against for a precision: f32's derived peak, or in
// bf16 the matrix unit's (AMX), else twice f32's with a native bf16 matmul.
double precision_peak_gflops(const CpuPeak& p, bool bf16, bool bf16_native);

// MFU = achieved / peak, or NaN when it cannot be told honestly: the peak is
// not plausible, or the ratio is above 1 (a ceiling below a measurement is a
// wrong ceiling). Printers show NaN as "n/a".
double honest_mfu(double achieved_gflops, double peak_gflops, bool plausible);
// "12.3%", or "n/a" for NaN.
std::string format_mfu(double mfu);

// Measures for about `seconds` in total with `threads` OpenMP threads (more
// when the clock reads out of bounds and is measured again).
CpuPeak measure_cpu_peak(int threads, double seconds = 0.3);

// What the OS and CPUID report (0 where they do not).
double reported_max_ghz();
double reported_base_ghz();

// The loops behind the measurement, for probes that sample them over time
// (profile/probe_throttle.h). Run on the calling thread.
// 10 dependent imuls per iteration: kClockChainCycles cycles per iteration.
inline constexpr int kClockChainCycles = 30;
int64_t clock_chain(int64_t iters);
// 10 dependent register-register adds per iteration: 10 cycles where nothing
// eliminates them.
int64_t add_chain(int64_t iters);
// The widest FMA loop this CPU has (AVX-512 or AVX2+FMA; nullptr without);
// fma_loop_flops(iters) is the FLOPs one call performs.
using FmaLoop = double (*)(int64_t iters);
FmaLoop fma_loop();
double fma_loop_flops(int64_t iters);
// Whether this CPU and OS let this process use AMX bf16 tiles (asks the
// kernel for the tile state once).
bool amx_bf16_usable();

}  // namespace crucible::profile
