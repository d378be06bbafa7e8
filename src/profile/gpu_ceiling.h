// What one GPU shows it can do, measured in the calling process: the ceilings
// a GPU step's MFU and its kernels' shares are quoted against (the CPU's are
// profile/cpu_peak.h's). bf16 and f32 GEMM through the same kernels::gemm the
// step uses (cuBLASLt), on square problems large enough to reach the rate, and
// device-to-device copy bandwidth (HBM: each byte read once, written once),
// in 3 x gemm_n^2 bf16 of the device's pool (384 MiB at 8192).
// Runs under the caller's kernels::DeviceScope-free thread: it opens its own
// scope on `device`, whose memory sources must be registered
// (kernels::cuda::use_device). Allocates from the device's pool and gives
// everything back. Not thread-safe with other work on the same GPU.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/status.h"

namespace crucible::profile {

struct GpuCeiling {
  std::string name;                 // cudaDeviceProp's
  int gemm_n = 0;                   // the square bf16 GEMM's size (f32: half of it)
  double bf16_gemm_tflops = 0;      // bf16 in, f32 accumulate, bf16 out
  double f32_gemm_tflops = 0;       // f32 in and out, no TF32, at gemm_n / 2
  double tf32_gemm_tflops = 0;      // f32 in and out, TF32 products, (gemm_n/2, gemm_n/2, gemm_n)
  double copy_gbs = 0;              // device-to-device, bytes read + written per second
};

// Seconds per call of `body` on the calling thread's GPU stream: one warm-up
// call (cuBLASLt's plan, the clocks ramping up), then the best of `trials`
// timings of `reps` back-to-back calls, each ended by waiting for the stream.
// A peak is the rate the part sustains once awake, not an average over its
// wake-up. An error from `body` or the stream ends it.
Result<double> gpu_best_seconds(int reps, int trials, const std::function<Status()>& body);

// `n`: the GEMM's size (8192 on a datacenter GPU: ~1.4 ms per bf16 call on
// an H100/H200). Returns invalid when the device is not a GPU in use.
Result<GpuCeiling> measure_gpu_ceiling(Device device, int n = 8192);
nlohmann::json to_json(const GpuCeiling& c);

// One GEMM's rate at one shape: C (m, n) = A (m, k) B (k, n) through
// kernels::gemm, bf16 (f32 accumulate, bf16 out) or f32 (no TF32), and
// through kernels::cuda::gemm_tf32 (f32 with TF32 products: no crucible
// precision trains with it; what a PyTorch user's allow_tf32 gets).
struct GpuGemmRow {
  int64_t m = 0, n = 0, k = 0;
  std::string dtype;  // "bf16" | "f32" | "tf32"
  double tflops = 0;
};
// Every shape in the three precisions, in one allocation as large as the largest
// (f32) operands, given back at the end. The planner's efficiency table for
// a GPU node comes from these (plan --cluster-from-probe).
// `dtypes`: which of the three to time (a run times its own precision alone).
Result<std::vector<GpuGemmRow>> measure_gpu_gemms(Device device, const std::vector<std::array<int64_t, 3>>& shapes,
                                                  const std::vector<std::string>& dtypes = {"bf16", "f32", "tf32"});

// The step's attention on the GPU, forward and backward through the kernels
// the step calls (kernels::attention_*; bf16 or f32), at (B, T, C, NH):
// TFLOP/s counting 3.5 x 2 B NH T^2 hs per pass (forward 2 B NH T^2 hs,
// backward 2.5x: the CPU's row's count, profile/probe_step_gemms.h). A run's
// prediction reads it in place of a fraction of the GEMM ceiling.
Result<double> measure_gpu_attention(Device device, int B, int T, int C, int NH, bool half);

}  // namespace crucible::profile
