// `crucible plan --calibrate RUN...`: refit a cluster file's efficiencies
// from finished runs, so this machine's predictions track what it does.
//
// Each run gives its model, its layout and its measured step (the median of
// each phase over its steps after the first two: metrics.jsonl). Fitted, in
// turn and repeated until they settle (each changes the others'
// predictions):
//   compute     the GEMM efficiency table: each run's GEMM shapes (forward,
//               input and weight gradients) get the efficiency there x the
//               run's predicted / measured forward + backward (its
//               tensor-parallel time excluded), averaged where runs share a
//               shape; other layouts interpolate between them
//   memory      memory_efficiency, by predicted / measured optimizer time
//               (AdamW streams memory and little else)
// A GPU run whose steps were replayed from a CUDA graph measured its device
// step whole (metrics.jsonl graph_ms), its phases not always: its predicted /
// measured device step (forward + backward + optimizer) scales its compute
// and its optimizer alike, and it is predicted as a graph (stack.graphs).
// The links stay as probed (`crucible launch -n N -- probe` measures them):
// a run's communication time on a shared CPU node is mostly waiting for the
// other ranks (fitting bandwidths to it made held-in runs worse, by up to
// 22%, when tried).
//   overhead    data_wait_ms (the loader's measured wait) and
//               step_overhead_ms: what the measured step exceeds everything
//               else predicted by (never below 0)
// The scalar scales are ratios of sums over runs (longer runs weigh more).
#pragma once
#include <string>
#include <vector>

#include "plan/cluster.h"
#include "plan/time_model.h"

namespace crucible::plan {

struct Measured {  // seconds per optimizer step, medians over steps
  double step = 0, data_wait = 0, forward = 0, backward = 0, optimizer = 0, dp_comm = 0, tp_comm = 0,
         pipeline_wait = 0;
  // The device's whole step where steps were replayed from a CUDA graph (the
  // median of those rows' graph_ms; the phases are over the rows that
  // measured them, an unsplit graph's not, and 0 where there are none); 0
  // where no step was.
  double graph = 0;
  uint64_t mem_peak = 0;  // the allocator's peak, the largest rank's
  int steps = 0;          // rows the medians are over
};

struct Observation {
  std::string run;  // its directory, for the report
  nn::GPTConfig model;
  Candidate layout;
  Measured measured;
};

struct Calibration {
  Cluster cluster;     // refitted
  std::string report;  // per run: measured, predicted before and after, error; the median error before and after
  double median_error_before = 0, median_error_after = 0;  // |predicted / measured - 1| of the step time
};

Result<Calibration> calibrate(const Cluster& cluster, const std::vector<Observation>& runs);

}  // namespace crucible::plan
