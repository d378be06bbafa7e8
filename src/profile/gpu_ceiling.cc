#include "profile/gpu_ceiling.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "core/allocator.h"
#include "core/clock.h"
#include "kernels/cuda/cuda.h"
#include "kernels/device_scope.h"
#include "kernels/gemm.h"
#include "kernels/kernels.h"

namespace crucible::profile {

Result<double> gpu_best_seconds(int reps, int trials, const std::function<Status()>& body) {
  CRUCIBLE_RETURN_IF_ERROR(body());
  CRUCIBLE_RETURN_IF_ERROR(kernels::cuda::synchronize(nullptr));
  double best = 1e30;
  for (int t = 0; t < trials; ++t) {
    const int64_t t0 = now_ns();
    for (int r = 0; r < reps; ++r) CRUCIBLE_RETURN_IF_ERROR(body());
    CRUCIBLE_RETURN_IF_ERROR(kernels::cuda::synchronize(nullptr));
    best = std::min(best, (now_ns() - t0) * 1e-9 / reps);
  }
  CRUCIBLE_RETURN_IF_ERROR(kernels::cuda::last_error("[probe] gpu ceiling"));
  return best;
}

Result<GpuCeiling> measure_gpu_ceiling(Device device, int n) {
  if (!device.is_cuda()) return Status::invalid("[probe] gpu ceiling: " + device.str() + " is not a GPU");
  auto info = kernels::cuda::device_info(device.index);
  if (!info) return info.status();
  GpuCeiling c;
  c.name = info->name;
  c.gemm_n = n;
  Allocator& pool = Allocator::of(device);
  // Three n x n bf16 matrices (128 MiB each at 8192), reused by the f32 GEMM
  // at n/2 (the same bytes; CUDA cores reach their rate well below 8192) and
  // by the copy: a run measures its ceiling beside its model, in 3/8 GiB.
  const size_t elems = size_t(n) * size_t(n), bytes = elems * 2;
  void* a = pool.allocate(bytes, "probe.gpu_ceiling");
  void* b = pool.allocate(bytes, "probe.gpu_ceiling");
  void* cm = pool.allocate(bytes, "probe.gpu_ceiling");
  kernels::DeviceScope on(device);
  // Operands of ones (as f32 words; as bf16 pairs, 1.0 and 0): values do not
  // change a GEMM's rate, and the pool's memory is zeroed, which some parts
  // clock-gate.
  kernels::fill(static_cast<float*>(a), elems / 2, 1.0f);
  kernels::fill(static_cast<float*>(b), elems / 2, 1.0f);
  const int nf = n / 2;
  auto bf = gpu_best_seconds(10, 3, [&] {
    kernels::gemm(DType::bf16, DType::bf16, false, false, n, n, n, a, n, b, n, cm, n, false, nullptr);
    return Status::ok();
  });
  auto f32 = gpu_best_seconds(5, 3, [&] {
    kernels::gemm(DType::f32, DType::f32, false, false, nf, nf, nf, a, nf, b, nf, cm, nf, false, nullptr);
    return Status::ok();
  });
  // TF32 at (n/2, n/2, n): f32 operands of n/2 x n are the bf16 matrices' bytes.
  auto tf32 = gpu_best_seconds(10, 3, [&] {
    kernels::cuda::gemm_tf32(nf, nf, n, static_cast<const float*>(a), static_cast<const float*>(b),
                             static_cast<float*>(cm), kernels::current_target().stream);
    return Status::ok();
  });
  // Copy bandwidth: one matrix into another, counted as read + write.
  auto copy = gpu_best_seconds(20, 3, [&] {
    kernels::copy_bytes(cm, a, bytes);
    return Status::ok();
  });
  pool.release(a);
  pool.release(b);
  pool.release(cm);
  if (!bf) return bf.status();
  if (!f32) return f32.status();
  if (!tf32) return tf32.status();
  if (!copy) return copy.status();
  const double flops = 2.0 * double(n) * n * n, flops_f32 = 2.0 * double(nf) * nf * nf;
  c.bf16_gemm_tflops = flops / *bf * 1e-12;
  c.f32_gemm_tflops = flops_f32 / *f32 * 1e-12;
  c.tf32_gemm_tflops = 2.0 * double(nf) * nf * n / *tf32 * 1e-12;
  c.copy_gbs = 2.0 * double(bytes) / *copy * 1e-9;
  return c;
}

Result<std::vector<GpuGemmRow>> measure_gpu_gemms(Device device, const std::vector<std::array<int64_t, 3>>& shapes,
                                                  const std::vector<std::string>& dtypes) {
  if (!device.is_cuda()) return Status::invalid("[probe] gpu gemms: " + device.str() + " is not a GPU");
  size_t most[3] = {1, 1, 1};  // elements of A, B and C at their largest
  for (const auto& [m, n, k] : shapes)
    most[0] = std::max(most[0], size_t(m * k)), most[1] = std::max(most[1], size_t(k * n)),
    most[2] = std::max(most[2], size_t(m * n));
  Allocator& pool = Allocator::of(device);
  void* buf[3];
  for (int i = 0; i < 3; ++i) buf[i] = pool.allocate(most[i] * 4, "probe.gpu_gemms");
  kernels::DeviceScope on(device);
  for (int i = 0; i < 2; ++i) kernels::fill(static_cast<float*>(buf[i]), most[i], 1.0f);  // not zeros: see above
  std::vector<GpuGemmRow> rows;
  Status status;  // the first failure, if any
  for (const auto& [m, n, k] : shapes) {
    for (const std::string& d : dtypes) {
      const int M = int(m), N = int(n), K = int(k);
      const DType t = d == "bf16" ? DType::bf16 : DType::f32;
      auto s = gpu_best_seconds(d == "f32" ? 2 : 5, 3, [&] {
        if (d == "tf32")
          kernels::cuda::gemm_tf32(M, N, K, static_cast<const float*>(buf[0]), static_cast<const float*>(buf[1]),
                                   static_cast<float*>(buf[2]), kernels::current_target().stream);
        else
          kernels::gemm(t, t, false, false, M, N, K, buf[0], K, buf[1], N, buf[2], N, false, nullptr);
        return Status::ok();
      });
      if (!s) {
        status = s.status();
        break;
      }
      rows.push_back({m, n, k, d, 2.0 * double(m) * n * k / *s * 1e-12});
    }
    if (!status.is_ok()) break;
  }
  for (void* p : buf) pool.release(p);
  if (!status.is_ok()) return status;
  return rows;
}

Result<double> measure_gpu_attention(Device device, int B, int T, int C, int NH, bool half) {
  if (!device.is_cuda()) return Status::invalid("[probe] gpu attention: " + device.str() + " is not a GPU");
  const size_t n = size_t(B) * T * C, nl = size_t(B) * NH * T, w = half ? 2 : 4;
  Allocator& pool = Allocator::of(device);
  // qkv (3n), out (n), dqkv (3n) of the precision's width; dout (n) and lse (nl) f32.
  void* qkv = pool.allocate(3 * n * w, "probe.gpu_attention");
  void* out = pool.allocate(n * w, "probe.gpu_attention");
  void* dqkv = pool.allocate(3 * n * w, "probe.gpu_attention");
  float* dout = static_cast<float*>(pool.allocate(n * 4, "probe.gpu_attention"));
  float* lse = static_cast<float*>(pool.allocate(nl * 4, "probe.gpu_attention"));
  kernels::DeviceScope on(device);
  // Small values of either width: the f32 word 0x3C233C23 is 0.00996 and, read
  // as a bf16 pair, 0.00995 twice. The rate does not depend on them; the
  // softmax stays far from overflow.
  const uint32_t word = 0x3C233C23u;
  float small = 0;
  std::memcpy(&small, &word, sizeof small);
  kernels::fill(static_cast<float*>(qkv), 3 * n * w / 4, small);
  kernels::fill(dout, n, 0.01f);
  auto s = gpu_best_seconds(3, 3, [&] {
    if (half) {
      kernels::attention_forward_bf16(static_cast<bf16*>(out), lse, static_cast<const bf16*>(qkv), B, T, C, NH);
      kernels::attention_backward_bf16(static_cast<bf16*>(dqkv), dout, static_cast<const bf16*>(qkv),
                                       static_cast<const bf16*>(out), lse, B, T, C, NH);
    } else {
      kernels::attention_forward(static_cast<float*>(out), lse, static_cast<const float*>(qkv), B, T, C, NH);
      kernels::attention_backward(static_cast<float*>(dqkv), dout, static_cast<const float*>(qkv),
                                  static_cast<const float*>(out), lse, B, T, C, NH);
    }
    return Status::ok();
  });
  for (void* p : {qkv, out, dqkv, static_cast<void*>(dout), static_cast<void*>(lse)}) pool.release(p);
  if (!s) return s.status();
  const double flops = 3.5 * 2.0 * B * NH * double(T) * T * (double(C) / NH);
  return flops / *s * 1e-12;
}

nlohmann::json to_json(const GpuCeiling& c) {
  return {{"name", c.name},
          {"gemm_n", c.gemm_n},
          {"bf16_gemm_tflops", c.bf16_gemm_tflops},
          {"f32_gemm_tflops", c.f32_gemm_tflops},
          {"tf32_gemm_tflops", c.tf32_gemm_tflops},
          {"copy_gbs", c.copy_gbs}};
}

}  // namespace crucible::profile
