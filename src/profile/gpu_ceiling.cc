#include "profile/gpu_ceiling.h"

#include <algorithm>

#include "core/allocator.h"
#include "core/clock.h"
#include "kernels/cuda/cuda.h"
#include "kernels/device_scope.h"
#include "kernels/gemm.h"
#include "kernels/kernels.h"

namespace crucible::profile {

namespace {

// Seconds per call of `body`: one warm-up call (cuBLASLt's plan, the clocks
// ramping up), then the best of `trials` timings of `reps` back-to-back calls,
// each ended by waiting for the stream. A peak is the rate the part sustains
// once awake, not an average over its wake-up.
template <typename F>
Result<double> best_seconds(int reps, int trials, F body) {
  body();
  CRUCIBLE_RETURN_IF_ERROR(kernels::cuda::synchronize(nullptr));
  double best = 1e30;
  for (int t = 0; t < trials; ++t) {
    const int64_t t0 = now_ns();
    for (int r = 0; r < reps; ++r) body();
    CRUCIBLE_RETURN_IF_ERROR(kernels::cuda::synchronize(nullptr));
    best = std::min(best, (now_ns() - t0) * 1e-9 / reps);
  }
  CRUCIBLE_RETURN_IF_ERROR(kernels::cuda::last_error("[probe] gpu ceiling"));
  return best;
}

}  // namespace

Result<GpuCeiling> measure_gpu_ceiling(Device device, int n) {
  if (!device.is_cuda()) return Status::invalid("[probe] gpu ceiling: " + device.str() + " is not a GPU");
  auto info = kernels::cuda::device_info(device.index);
  if (!info) return info.status();
  GpuCeiling c;
  c.name = info->name;
  c.gemm_n = n;
  Allocator& pool = Allocator::of(device);
  const size_t elems = size_t(n) * size_t(n);
  // f32 operands: A, B, C; the bf16 GEMM reuses their memory at half width.
  void* a = pool.allocate(elems * 4, "probe.gpu_ceiling");
  void* b = pool.allocate(elems * 4, "probe.gpu_ceiling");
  void* cm = pool.allocate(elems * 4, "probe.gpu_ceiling");
  kernels::DeviceScope on(device);
  // Operands of ones: values do not change a GEMM's rate (no data-dependent
  // paths), and the pool's memory is zeroed, which some parts clock-gate.
  kernels::fill(static_cast<float*>(a), elems, 1.0f);
  kernels::fill(static_cast<float*>(b), elems, 1.0f);
  const double flops = 2.0 * double(n) * n * n;
  auto bf = best_seconds(10, 3, [&] {
    kernels::gemm(DType::bf16, DType::bf16, false, false, n, n, n, a, n, b, n, cm, n, false, nullptr);
  });
  auto f32 = best_seconds(3, 3, [&] {
    kernels::gemm(DType::f32, DType::f32, false, false, n, n, n, a, n, b, n, cm, n, false, nullptr);
  });
  // Copy bandwidth: 3 x n^2 floats one way (A and B into C's region is too
  // small; A -> C alone), counted as read + write.
  const size_t copy_bytes = elems * 4;
  auto copy = best_seconds(20, 3, [&] { kernels::copy_bytes(cm, a, copy_bytes); });
  pool.release(a);
  pool.release(b);
  pool.release(cm);
  if (!bf) return bf.status();
  if (!f32) return f32.status();
  if (!copy) return copy.status();
  c.bf16_gemm_tflops = flops / *bf * 1e-12;
  c.f32_gemm_tflops = flops / *f32 * 1e-12;
  c.copy_gbs = 2.0 * double(copy_bytes) / *copy * 1e-9;
  return c;
}

nlohmann::json to_json(const GpuCeiling& c) {
  return {{"name", c.name},
          {"gemm_n", c.gemm_n},
          {"bf16_gemm_tflops", c.bf16_gemm_tflops},
          {"f32_gemm_tflops", c.f32_gemm_tflops},
          {"copy_gbs", c.copy_gbs}};
}

}  // namespace crucible::profile
