#include "runtime/step_ceiling.h"

#include <fmt/format.h>

#include "core/threads.h"
#include "kernels/gemm.h"
#include "profile/cpu_peak.h"
#include "profile/gpu_ceiling.h"
#include "profile/local_probe.h"

namespace crucible::runtime {

StepCeiling step_ceiling(Device device, bool bf16, const nlohmann::json& probe,
                         const std::function<void(const std::string&)>& log) {
  StepCeiling c;
  if (device.is_cpu()) {
    const profile::CpuPeak peak = profile::measure_cpu_peak(num_threads(), 0.2);
    c.peak_gflops = profile::precision_peak_gflops(peak, bf16, kernels::gemm_bf16_native());
    c.known = peak.plausible;
    if (!c.known)
      log("[train] MFU not shown: this CPU's peak could not be measured (" +
          (peak.notes.empty() ? std::string("?") : peak.notes[0]) + ")");
    c.gemm_gflops = profile::gemm_ceiling(probe, num_threads(), bf16 ? "bf16" : "f32");
    return c;
  }
  auto ceiling = profile::measure_gpu_ceiling(device);
  if (!ceiling) {
    log("[train] MFU not shown: " + ceiling.status().message());
    return c;
  }
  c.peak_gflops = c.gemm_gflops =
      1e3 * (bf16 ? ceiling->bf16_gemm_tflops : ceiling->f32_gemm_tflops);
  c.known = true;
  log(fmt::format(
      "[train] {} ({}): GEMM {:.0f} TFLOP/s {} measured now, MFU's ceiling; copy {:.0f} GB/s",
      device.str(), ceiling->name, c.peak_gflops * 1e-3, bf16 ? "bf16" : "f32", ceiling->copy_gbs));
  return c;
}

}  // namespace crucible::runtime
