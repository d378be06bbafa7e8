// What a training run quotes its MFU against (docs/observability.md): the
// device's peak for the run's precision and the best GEMM it showed.
//   CPU: the FMA peak measured now (f32; in bf16 the matrix unit's, or twice
//        f32's with a native bf16 matmul: profile/cpu_peak.h), and the
//        probe's best all-thread GEMM of the precision;
//   GPU: the GEMM rate of the precision measured now through the step's own
//        cuBLASLt path (profile/gpu_ceiling.h, ~0.5 s), both figures.
// Where the peak cannot be measured (a CPU clock out of physical bounds, a
// GPU error) `known` is false, the MFU is not shown, and the log says why.
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "core/device.h"

namespace crucible::runtime {

struct StepCeiling {
  double peak_gflops = 0;  // per rank
  bool known = false;
  double gemm_gflops = 0;  // per rank; 0: unknown (no MFU of GEMM)
};

// `probe`: the run's probe document (profile/local_probe.h; may be null).
StepCeiling step_ceiling(Device device, bool bf16, const nlohmann::json& probe,
                         const std::function<void(const std::string&)>& log);

}  // namespace crucible::runtime
