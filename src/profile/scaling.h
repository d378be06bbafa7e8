// Strong-scaling analysis: speedups over world sizes at a fixed global batch,
// Amdahl's-law fit, Karp–Flatt metric, and reading the points from run
// directories (`crucible bench scaling`). Pure functions except
// scaling_from_runs / read_scaling_run / write_scaling_json (files). Thread-safe.
//
// Units: the smallest measured world size n0 is the unit of work. With
// p = n / n0 and S = throughput(n) / throughput(n0):
//   efficiency  E = S / p
//   Karp–Flatt  e = (1/S - 1/p) / (1 - 1/p)      (p > 1; the experimentally
//               determined serial fraction; equals s at every p for exact
//               Amdahl data)
//   Amdahl      1/S = s + (1 - s)/p
// When n0 = 1 (the usual case) p = n and s is the serial fraction of the
// one-rank step.
#pragma once
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "core/status.h"

namespace crucible::profile {

struct SpeedupPoint {
  double n = 1;        // parallel units (p above)
  double speedup = 1;  // S above
};

// Least squares of 1/S against 1/p: 1/S = a + b/p. Unconstrained, so a
// mis-measured base point does not pin the fit; s = a / (a + b) renormalises
// it (exact Amdahl data gives a = s, b = 1 - s). Clamped to [0, 1].
// Needs at least two distinct n (otherwise serial_fraction = NaN).
struct AmdahlFit {
  double serial_fraction = 0;  // s
  double intercept = 0;        // a
  double slope = 0;            // b
  double rms_residual = 0;     // of 1/S
  // Predicted speedup at p: 1 / (s + (1-s)/p).
  double predict(double p) const;
};
AmdahlFit fit_amdahl(const std::vector<SpeedupPoint>& points);

// Karp–Flatt metric e(p, S); NaN for p <= 1.
double karp_flatt(double p, double speedup);

struct ScalingPoint {
  int ranks = 1;
  double tokens_per_s = 0;  // median over the measured steps
  double speedup = 1, efficiency = 1;
  double karp_flatt = 0;  // NaN at the base point (written as null)
};

struct ScalingResult {
  std::vector<ScalingPoint> points;  // ascending ranks
  AmdahlFit fit;
};

// Speedups against the smallest world size, Karp–Flatt, the Amdahl fit.
// Error when empty, a world size repeats, or a throughput is not positive.
Result<ScalingResult> analyze_scaling(std::vector<std::pair<int, double>> ranks_tokens_per_s);

// One run directory: the world size (`ranks` > 0 as given; 0: the number of
// metrics.rank*.jsonl files, 1 when there are none) and the median
// tokens_per_s of RUN/metrics.jsonl after skipping the first `skip_steps`
// lines (compilation, page faults, pool warm-up). Error when the file is
// missing or has no step after skipping. A `crucible sim` run (RUN/sim.json)
// gives steps per second (1000 / step_ms) in tokens_per_s's place, and its
// ranks from results.json.
struct RunThroughput {
  int ranks = 1;
  double tokens_per_s = 0;
  int steps_used = 0;
};
Result<RunThroughput> read_scaling_run(const std::string& run_dir, int ranks, int skip_steps);

// The points of several run directories (ranks[i] for dirs[i], or inferred
// when `ranks` is empty), analysed together.
Result<ScalingResult> scaling_from_runs(const std::vector<std::string>& dirs,
                                        const std::vector<int>& ranks, int skip_steps);

// {"points":[{"ranks","tokens_per_s","speedup","efficiency","karp_flatt"}],
//  "serial_fraction", "ideal":[{"ranks","speedup","tokens_per_s"}]}
nlohmann::json scaling_to_json(const ScalingResult& r);
// scaling_to_json, written atomically.
Status write_scaling_json(const std::string& path, const ScalingResult& r);
// The table printed by `crucible bench scaling`.
std::string scaling_table(const ScalingResult& r);

}  // namespace crucible::profile
