// NVML, the driver's management library: a GPU's energy counter, power, clocks,
// temperature and the reasons its clocks are held down. Loaded at run time
// (dlopen of libnvidia-ml.so.1, which ships with the driver, not the toolkit):
// a machine without an NVIDIA driver runs crucible as before, and every query
// then answers "not available here" with the reason, never a made-up figure.
//
// A GPU is found by its PCI bus id (kernels::cuda::DeviceInfo::pci_bus_id),
// since NVML's index order need not be CUDA's.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace crucible::profile {

struct NvmlSample {
  double energy_j = -1;       // the counter since the driver loaded; < 0: not read
  double power_w = -1;        // the board's draw now
  double power_limit_w = -1;  // the enforced limit
  int sm_clock_mhz = -1, mem_clock_mhz = -1, max_sm_clock_mhz = -1;
  int temperature_c = -1;
  uint64_t throttle = 0;  // NVML's clock event reason bits (throttle_names)
};

// The reasons in `bits` that hold the clocks down under load (idle and the
// applications-clock setting are not throttling), as NVML's names:
// "sw_power_cap", "hw_slowdown", "sw_thermal", "hw_thermal", "hw_power_brake",
// "sync_boost". Empty: running at the clocks it may.
std::vector<std::string> throttle_names(uint64_t bits);

class NvmlDevice {
 public:
  // GPU `pci_bus_id` ("0000:65:00.0"), or one line saying why not: no driver
  // library, NVML's init failing, no such GPU.
  static Result<NvmlDevice> open(const std::string& pci_bus_id);
  // Every figure NVML gives for this GPU now (those it refuses stay < 0).
  NvmlSample sample() const;
  // The energy counter alone (joules), or why it cannot be read.
  Result<double> energy_j() const;

 private:
  void* handle_ = nullptr;  // nvmlDevice_t
};

}  // namespace crucible::profile
