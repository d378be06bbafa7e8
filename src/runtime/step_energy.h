// The energy of each training step (profile/energy.h), for the whole job: the
// first rank on each host reads that host's RAPL packages (every rank on a
// host would read the same counter), a GPU rank reads its own board's NVML
// counter; the step's joules are summed over the ranks. A host or GPU whose
// counter cannot be read makes the job's energy unknown (a partial sum would
// pass for the whole), and the log says which and why, once.
//
// Collective: open() and end() are called by every rank at the same points.
// Not thread-safe (the training loop's thread).
#pragma once
#include <optional>
#include <string>

#include "comm/comm.h"
#include "core/device.h"
#include "core/status.h"
#include "profile/energy.h"
#include "runtime/metrics.h"

namespace crucible::runtime {

class StepEnergy {
 public:
  // Opens this rank's meter where it owns one and agrees over `comm` whether
  // the job's energy is measurable. `note` receives one line for the log:
  // the source measured, or why there is none.
  Status open(comm::Comm& comm, const Device& device, std::string* note);
  bool measurable() const { return measurable_; }
  // At the step's start (after the previous step's bookkeeping).
  void begin();
  // At the step's end (where step_ms is taken): fills m's energy fields
  // (energy_j, power_w over m.step_ms, j_per_token over `tokens`) and, on a
  // GPU, its power, clock, temperature and throttle bits. Collective when
  // the world has more than one rank.
  Status end(comm::Comm& comm, double tokens, StepMetrics& m);

 private:
  std::optional<profile::EnergyMeter> meter_;
  bool measurable_ = false;
  double at_begin_ = 0;
};

}  // namespace crucible::runtime
