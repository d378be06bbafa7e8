// End-of-run health checks over a run's own series (docs/observability.md):
//   - leaks: the allocator's in-use floor growing steadily across steps,
//     overall and per allocation-site class (the allocator's tags);
//   - stragglers: a rank whose compute time per step exceeds the median
//     rank's by more than 10%, named with the phase the excess is in;
//   - distribution: communication per step far from what the parallel layout
//     implies (training "not actually distributing").
// record_step is called by every rank after each step; finish is collective.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "core/status.h"
#include "comm/comm.h"
#include "profile/analysis.h"
#include "runtime/metrics.h"

namespace crucible::runtime {

class RunHealth {
 public:
  // This rank's step: its phase times and the allocator's live bytes (in all
  // and by tag).
  void record_step(const StepMetrics& m);
  // Gathers every rank's phase times and returns one warning line per
  // finding (the same lines on every rank). expected_comm_bytes: what the
  // layout implies per step and rank (0: no check). Collective.
  Result<std::vector<std::string>> finish(comm::Comm& comm, double expected_comm_bytes) const;

 private:
  std::vector<profile::PhaseTimes> phases_;
  std::vector<double> in_use_, comm_bytes_;
  std::map<std::string, std::vector<double>> by_site_;
};

}  // namespace crucible::runtime
