// Per-kernel-class time accounting: every call through the kernel dispatch
// wrappers (kernels.h) and every GEMM adds its wall time, call count and FLOPs
// to one global table, so benchmarks and the step breakdown can say where the
// time went without an external profiler. Two clock reads per kernel call.
// Recording is meant for the single training thread; reads are snapshots.
#pragma once
#include <array>
#include <cstdint>

#include "core/clock.h"

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
};

using KernelStatsTable = std::array<KernelClassStats, int(KernelClass::count)>;

KernelStatsTable& kernel_stats();
void reset_kernel_stats();

class ScopedKernelTimer {
 public:
  explicit ScopedKernelTimer(KernelClass c, double flops = 0) : c_(c), flops_(flops), t0_(now_ns()) {}
  ~ScopedKernelTimer() {
    auto& s = kernel_stats()[int(c_)];
    s.ns += now_ns() - t0_;
    s.calls += 1;
    s.flops += flops_;
  }

 private:
  KernelClass c_;
  double flops_;
  int64_t t0_;
};

}  // namespace crucible
