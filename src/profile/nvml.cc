#include "profile/nvml.h"

#include <dlfcn.h>

#include <mutex>

namespace crucible::profile {
namespace {

// NVML's C ABI, the few entry points used here (nvml.h is not part of the
// CUDA toolkit on every machine; these declarations are its stable ABI).
using nvmlReturn_t = int;  // NVML_SUCCESS = 0
using nvmlDevice_t = void*;
constexpr int kNvmlClockSm = 1, kNvmlClockMem = 2, kNvmlTemperatureGpu = 0;

struct Nvml {
  nvmlReturn_t (*init)() = nullptr;
  const char* (*error_string)(nvmlReturn_t) = nullptr;
  nvmlReturn_t (*by_pci)(const char*, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*energy)(nvmlDevice_t, unsigned long long*) = nullptr;  // mJ
  nvmlReturn_t (*power)(nvmlDevice_t, unsigned*) = nullptr;             // mW
  nvmlReturn_t (*power_limit)(nvmlDevice_t, unsigned*) = nullptr;       // mW
  nvmlReturn_t (*clock)(nvmlDevice_t, int, unsigned*) = nullptr;        // MHz
  nvmlReturn_t (*max_clock)(nvmlDevice_t, int, unsigned*) = nullptr;
  nvmlReturn_t (*temperature)(nvmlDevice_t, int, unsigned*) = nullptr;  // °C
  nvmlReturn_t (*reasons)(nvmlDevice_t, unsigned long long*) = nullptr;
  std::string error;  // non-empty: NVML cannot be used here
};

template <class F>
bool bind(void* lib, const char* name, F& f) {
  f = reinterpret_cast<F>(dlsym(lib, name));
  return f != nullptr;
}

// Loaded and initialised once per process; the library stays loaded.
const Nvml& nvml() {
  static Nvml n;
  static std::once_flag once;
  std::call_once(once, [] {
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      n.error = "no NVIDIA driver library here (libnvidia-ml.so.1 did not load)";
      return;
    }
    const bool ok = bind(lib, "nvmlInit_v2", n.init) && bind(lib, "nvmlErrorString", n.error_string) &&
                    bind(lib, "nvmlDeviceGetHandleByPciBusId_v2", n.by_pci) &&
                    bind(lib, "nvmlDeviceGetTotalEnergyConsumption", n.energy) &&
                    bind(lib, "nvmlDeviceGetPowerUsage", n.power) &&
                    bind(lib, "nvmlDeviceGetEnforcedPowerLimit", n.power_limit) &&
                    bind(lib, "nvmlDeviceGetClockInfo", n.clock) &&
                    bind(lib, "nvmlDeviceGetMaxClockInfo", n.max_clock) &&
                    bind(lib, "nvmlDeviceGetTemperature", n.temperature);
    // Renamed in driver 535; the old name stays as an alias on newer drivers.
    if (ok && !bind(lib, "nvmlDeviceGetCurrentClocksEventReasons", n.reasons))
      bind(lib, "nvmlDeviceGetCurrentClocksThrottleReasons", n.reasons);
    if (!ok || !n.reasons) {
      n.error = "the driver's NVML lacks an entry point crucible reads (driver too old?)";
      return;
    }
    if (nvmlReturn_t r = n.init(); r != 0) n.error = std::string("NVML did not initialise: ") + n.error_string(r);
  });
  return n;
}

}  // namespace

std::vector<std::string> throttle_names(uint64_t bits) {
  static constexpr std::pair<uint64_t, const char*> kReasons[] = {
      {0x4, "sw_power_cap"},   {0x8, "hw_slowdown"},     {0x10, "sync_boost"},
      {0x20, "sw_thermal"},    {0x40, "hw_thermal"},     {0x80, "hw_power_brake"},
  };
  std::vector<std::string> out;
  for (const auto& [bit, name] : kReasons)
    if (bits & bit) out.push_back(name);
  return out;
}

Result<NvmlDevice> NvmlDevice::open(const std::string& pci_bus_id) {
  const Nvml& n = nvml();
  if (!n.error.empty()) return Status::not_found("[nvml] " + n.error);
  NvmlDevice d;
  nvmlDevice_t h = nullptr;
  if (nvmlReturn_t r = n.by_pci(pci_bus_id.c_str(), &h); r != 0)
    return Status::not_found("[nvml] no GPU at PCI " + pci_bus_id + ": " + n.error_string(r));
  d.handle_ = h;
  return d;
}

Result<double> NvmlDevice::energy_j() const {
  const Nvml& n = nvml();
  unsigned long long mj = 0;
  if (nvmlReturn_t r = n.energy(handle_, &mj); r != 0)
    return Status::not_found(std::string("[nvml] the GPU's energy counter cannot be read: ") + n.error_string(r));
  return double(mj) * 1e-3;
}

NvmlSample NvmlDevice::sample() const {
  const Nvml& n = nvml();
  NvmlSample s;
  if (auto e = energy_j()) s.energy_j = *e;
  unsigned u = 0;
  if (n.power(handle_, &u) == 0) s.power_w = u * 1e-3;
  if (n.power_limit(handle_, &u) == 0) s.power_limit_w = u * 1e-3;
  if (n.clock(handle_, kNvmlClockSm, &u) == 0) s.sm_clock_mhz = int(u);
  if (n.clock(handle_, kNvmlClockMem, &u) == 0) s.mem_clock_mhz = int(u);
  if (n.max_clock(handle_, kNvmlClockSm, &u) == 0) s.max_sm_clock_mhz = int(u);
  if (n.temperature(handle_, kNvmlTemperatureGpu, &u) == 0) s.temperature_c = int(u);
  unsigned long long bits = 0;
  if (n.reasons(handle_, &bits) == 0) s.throttle = bits;
  return s;
}

}  // namespace crucible::profile
