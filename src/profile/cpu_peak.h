// The CPU's fp32 FMA peak, derived from what the CPU is: sustained clock
// (measured with a dependent integer-add chain, one add per cycle, on every
// thread at once) x FMA pipes x vector lanes x 2 FLOPs x threads. An FMA
// throughput loop measured the same way cross-checks the derivation.
#pragma once
#include <cstdint>
#include <string>

namespace crucible::profile {

struct CpuPeak {
  std::string isa;          // widest vector ISA used for the derivation
  int lanes = 0;            // fp32 lanes per vector
  int fma_units = 0;        // FMA pipes per core (2 on the x86 server cores we target)
  int threads = 0;
  double clock_ghz = 0;     // sustained, measured under load on all threads
  double derived_gflops = 0;   // threads * fma_units * lanes * 2 * clock
  double measured_gflops = 0;  // FMA throughput loop on all threads
};

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
