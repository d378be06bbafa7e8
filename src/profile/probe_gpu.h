// crucible probe, gpu section: each CUDA GPU this process can use, measured
// through the same paths the step runs on (kernels::gemm on cuBLASLt, the
// allocator's device and pinned pools), and watched by NVML through a
// sustained GEMM load long enough to heat it: the GPU's throttle section.
//
// JSON ("gpu"):
//   count          GPUs measured (0: none, and `why`)
//   devices: [{
//     index, name, pci_bus_id, compute_capability ("9.0"), sms, memory_bytes
//     bf16_gemm_tflops, f32_gemm_tflops, gemm_n   square GEMMs (profile/gpu_ceiling.h)
//     copy_gbs                device-to-device copy, bytes read + written per second
//     h2d_pinned_gbs, d2h_pinned_gbs, h2d_pageable_gbs, d2h_pageable_gbs
//                             256 MiB copies from/to pinned (the allocator's
//                             pinned pool) and pageable (its host pool) memory
//     launch_us               back-to-back launches of a one-element kernel,
//                             per launch, until the stream drains
//     nvml: {power_w, power_limit_w, sm_clock_mhz, max_sm_clock_mhz,
//            mem_clock_mhz, temperature_c} at rest, or nvml_unavailable: why
//     load: {seconds, bf16_tflops (sustained), first_sm_clock_mhz and
//            last_sm_clock_mhz (means over the first and last second),
//            mean_power_w (the energy counter over the load), energy_j,
//            max_temperature_c, throttle: [NVML's reasons seen under load],
//            throttling (a power or thermal reason held the clocks)}
//   }]
//
// Bounds a figure is checked against (tests/gpu/gpu_probe_test.cc): a GEMM
// under its datasheet peak, a copy under HBM's datasheet bandwidth, the
// power under its enforced limit.
//
// Not thread-safe with other work on the same GPUs.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace crucible::profile {

struct GpuProbeOptions {
  bool quick = false;
  double load_s = 0;  // the sustained load; 0: 20 s (quick: 3 s)
  int only = -1;      // >= 0: that GPU alone (a run's own; no peers), count still all of them
};

nlohmann::json probe_gpu(const GpuProbeOptions& opt);
std::string gpu_table(const nlohmann::json& j);

}  // namespace crucible::profile
