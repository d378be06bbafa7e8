// Energy: the joules the hardware under a run drew, read from the counters the
// hardware keeps itself — RAPL's package domains on a CPU (Linux powercap,
// /sys/class/powercap/intel-rapl:N, which AMD's Zen parts expose under the same
// name) and NVML's total-energy counter on an NVIDIA GPU. A meter is read at
// step edges; the difference is the step's energy. Where no counter can be
// read (a VM that hides RAPL, no driver) the meter is refused with the reason
// and a run records no energy: never an estimate passed off as a measurement.
//
// Counters: RAPL's energy_uj wraps at max_energy_range_uj (~262 kJ: a quarter
// hour of a 300 W package); a reading below the previous one is one wrap,
// corrected (a read interval longer than a whole wrap cannot be told apart:
// read at least once a minute). NVML's counter is 64-bit millijoules since the
// driver loaded: no wrap.
//
// What is measured: RAPL's package domains are whole sockets (every process on
// them, and on AMD the cores only), so on a shared machine a run's joules
// include its neighbours'; a GPU's counter is the whole board. The run's
// report says which source it read.
//
// Thread-safety: a meter is used by one thread at a time.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/status.h"
#include "profile/nvml.h"

namespace crucible::profile {

// "4.91 mJ/tok", "1.20 J/tok": the live line's and the report's figure.
std::string format_energy_per_token(double joules);

class EnergyMeter {
 public:
  // The CPU packages' RAPL counters under `powercap_root` (the top-level
  // domains "intel-rapl:N" named "package-*"; their core/uncore/dram
  // sub-domains are inside them, and "psys" would count the packages twice).
  // not_found with the reason when there are none ("not measurable here").
  static Result<EnergyMeter> rapl(const std::string& powercap_root = "/sys/class/powercap");
  // The GPU at `pci_bus_id`'s board counter (NVML).
  static Result<EnergyMeter> gpu(const std::string& pci_bus_id, const std::string& label);
  // The meter for where a run computes: cpu → RAPL (under $CRUCIBLE_POWERCAP_ROOT
  // when set: containers that mount sysfs elsewhere, and tests), cuda:N →
  // that GPU's NVML counter.
  static Result<EnergyMeter> for_device(const Device& d);

  EnergyMeter(EnergyMeter&&) noexcept;
  EnergyMeter& operator=(EnergyMeter&&) noexcept;
  ~EnergyMeter();

  // "RAPL package-0 + package-1", "NVML cuda:0 (NVIDIA H200)".
  const std::string& source() const;
  // Joules since the meter was made; monotone. An error names the counter
  // that could not be read.
  Result<double> joules();
  // The GPU's power, clocks, temperature and throttle reasons now (NVML);
  // nullopt for a CPU meter.
  std::optional<NvmlSample> gpu_sample() const;

 private:
  struct Impl;
  explicit EnergyMeter(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace crucible::profile
