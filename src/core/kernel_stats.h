// Per-kernel-class time accounting: every call through the kernel dispatch
// wrappers (kernels.h) and every GEMM adds its wall time, call count and FLOPs
// to one global table, so benchmarks and the step breakdown can say where the
// time went without an external profiler. Two clock reads per kernel call.
// While the tracer is active (core/trace.h), each call is also a "kernel"
// trace event named by its class, reusing the same two clock reads.
// Recording is meant for the single training thread; reads are snapshots.
#pragma once
#include <array>
#include <cstdint>

#include "core/clock.h"
#include "core/trace.h"

namespace crucible {

enum class KernelClass : int {
  gemm,
  attention,
  layernorm,
  gelu,
  embedding,
  cross_entropy,
  optimizer,
  other,
  count
};

const char* kernel_class_name(KernelClass c);

struct KernelClassStats {
  int64_t ns = 0;
  int64_t calls = 0;
  double flops = 0;
  double bytes = 0;  // memory traffic by the kernels' cost models (kernels/cost.h)
};

using KernelStatsTable = std::array<KernelClassStats, int(KernelClass::count)>;

KernelStatsTable& kernel_stats();
void reset_kernel_stats();

class ScopedKernelTimer {
 public:
  explicit ScopedKernelTimer(KernelClass c, double flops = 0, double bytes = 0)
      : c_(c), flops_(flops), bytes_(bytes), t0_(now_ns()) {}
  ~ScopedKernelTimer() {
    const int64_t t1 = now_ns();
    auto& s = kernel_stats()[int(c_)];
    s.ns += t1 - t0_;
    s.calls += 1;
    s.flops += flops_;
    s.bytes += bytes_;
    if (trace::active()) trace::record_complete(kernel_class_name(c_), "kernel", t0_, t1);
  }

 private:
  KernelClass c_;
  double flops_, bytes_;
  int64_t t0_;
};

}  // namespace crucible
