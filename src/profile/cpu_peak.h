// The CPU's fp32 FMA peak, derived from what the CPU is: sustained clock
// (measured with a dependent integer-add chain, one add per cycle, on every
// thread at once) x FMA pipes x vector lanes x 2 FLOPs x threads. An FMA
// throughput loop measured the same way cross-checks the derivation, and
// gives the pipe count: full-width FMAs per cycle are 2 on most server cores
// but 1 where AVX-512 is double-pumped on 256-bit units (AMD Zen 4) or a
// core has one 512-bit FMA unit, and CPUID does not say which.
#pragma once
#include <cstdint>
#include <string>

namespace crucible::profile {

struct CpuPeak {
  std::string isa;          // widest vector ISA used for the derivation
  int lanes = 0;            // fp32 lanes per vector
  int fma_units = 0;        // full-width FMAs per cycle per core: 1 or 2, from the FMA loop
  int threads = 0;
  double clock_ghz = 0;     // sustained, measured under load on all threads
  double derived_gflops = 0;   // threads * fma_units * lanes * 2 * clock
  double measured_gflops = 0;  // FMA throughput loop on all threads
};

// The FMA pipes a measured loop shows: its FMAs per cycle per core, rounded,
// within [1, 2]; 2 (the common case) when the loop did not run. A clock read
// wrong (some VMs) can push the ratio out of range: the clamp keeps 1 or 2.
int fma_pipes_from_loop(double measured_gflops, int threads, int lanes, double clock_ghz);

// Measures for about `seconds` in total with `threads` OpenMP threads.
CpuPeak measure_cpu_peak(int threads, double seconds = 0.3);

// The loops behind the measurement, for probes that sample them over time
// (profile/probe_throttle.h). Run on the calling thread.
// 10 dependent integer adds per iteration: 10 cycles per iteration.
int64_t add_chain(int64_t iters);
// The widest FMA loop this CPU has (AVX-512 or AVX2+FMA; nullptr without);
// fma_loop_flops(iters) is the FLOPs one call performs.
using FmaLoop = double (*)(int64_t iters);
FmaLoop fma_loop();
double fma_loop_flops(int64_t iters);

}  // namespace crucible::profile
