// The closed loop on the README's own path: `crucible train` on the embedded
// default, in a directory with no probe.json, cluster.toml or calibration,
// measures this machine by itself (a quick probe) and stores a prediction
// whose step time is within 10% of the median step it then measures, in
// fp32 and bf16. Registered RUN_SERIAL (CMakeLists.txt): a second test
// process on a 2-core machine would slow the measured steps and not the
// prediction; and without OMP_WAIT_POLICY=PASSIVE, which the user's path
// does not set (the suite's other tests do). A shorter schedule than the
// default's 260 steps keeps it quick; the step is the default's.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/json_io.h"
#include "support/cli_runner.h"
#include "support/files.h"

namespace crucible::e2e {
namespace {

using testutil::TempDir;

// The steps after the second: their median and their spread (interquartile
// range over the median).
struct Steps {
  double median_ms = 0, spread = 0;
};
Steps measured_steps(const std::string& run) {
  std::vector<double> v;
  for (const nlohmann::json& r : metric_rows(run + "/metrics.jsonl"))
    if (r.value("step", 0) > 2) v.push_back(r.value("step_ms", 0.0));
  if (v.empty()) return {};
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return {v[n / 2], (v[3 * n / 4] - v[n / 4]) / v[n / 2]};
}

struct Attempt {
  bool ran = false;
  double ratio = 0;  // predicted / measured
  double spread = 0;
  double drift = 0;  // the machine's predicted step after the run over before it, minus 1
};

// A fresh `crucible train` in its own directory and cache, so that it
// measures this machine itself (not reusing the suite's cache, which other
// tests wrote while the machine was busy). Returns its output and directory.
struct Run {
  CliResult r;
  std::string dir;
};
Run fresh_run(const TempDir& dir, const std::string& name, const char* precision, int steps) {
  const std::string at = dir / name;
  ::setenv("CRUCIBLE_CACHE_DIR", (at + "/cache").c_str(), 1);
  ::unsetenv("OMP_WAIT_POLICY");
  auto r = run_crucible(
      {"train", "--run-dir", at + "/run", "--set", "train.steps=" + std::to_string(steps), "--set",
       "run.sample_tokens=0", "--set", std::string("train.precision=") + precision},
      dir.path());
  ::unsetenv("CRUCIBLE_CACHE_DIR");
  return {r, at + "/run"};
}

// The step time a run's plan.json predicts, in ms; 0 where it has none.
double predicted_ms(const std::string& run) {
  auto plan = read_json(run + "/plan.json");
  EXPECT_TRUE(plan.is_ok());
  if (!plan.is_ok() || !plan->contains("step_time_s")) return 0;
  return (*plan)["step_time_s"].get<double>() * 1e3;
}

// One attempt: a fresh run that measures this machine itself, then a second
// measurement of the machine right after it (a 2-step run that probes anew),
// to tell whether the machine's speed held while the run was measured.
Attempt attempt(const char* precision, int k) {
  TempDir dir(std::string("closed_loop_") + precision + "_" + std::to_string(k));
  const Run run = fresh_run(dir, "run", precision, 40);
  EXPECT_EQ(run.r.code, 0) << run.r.output;
  EXPECT_NE(run.r.output.find("[probe] measuring this machine"), std::string::npos) << run.r.output;
  const double before_ms = predicted_ms(run.dir);
  const Steps s = measured_steps(run.dir);
  EXPECT_GT(s.median_ms, 0);
  if (run.r.code != 0 || !(before_ms > 0) || !(s.median_ms > 0)) return {};
  const Run again = fresh_run(dir, "again", precision, 2);
  EXPECT_EQ(again.r.code, 0) << again.r.output;
  const double after_ms = predicted_ms(again.dir);
  if (again.r.code != 0 || !(after_ms > 0)) return {};
  const double drift = after_ms / before_ms - 1;
  std::printf(
      "[closed loop] %s, attempt %d: predicted %.1f ms/step, measured median %.1f ms (%+.1f%%), "
      "steps' spread %.0f%%; the machine measured again after the run predicts %.1f ms (%+.1f%%)\n",
      precision, k, before_ms, s.median_ms, 100 * (before_ms / s.median_ms - 1), 100 * s.spread,
      after_ms, 100 * drift);
  return {true, before_ms / s.median_ms, s.spread, drift};
}

// A shared VM's speed moves by more than the model's error: three identical
// default fp32 runs on a 2-vCPU Xeon VM measured step medians of 439, 600
// and 664 ms while the host took time from it (steal), their steps' spread
// (interquartile range over the median) 11%, 28% and 80%. A median from a
// run that unsteady cannot judge a 10% prediction. Nor can a steady run on a
// machine whose speed moved between the probe and the run: CI once measured
// attempts 9-12% spread whose medians were 311, 350 and 415 ms for one step
// predicted at 388-421 ms. So the machine is measured again right after the
// run; where that measurement predicts a step more than 10% from the first,
// the machine moved by more than the tolerance being judged.
// Up to three fresh attempts; one whose steps spread by more than 15%, or
// whose machine drifted more than 10%, is not a judgement; the prediction
// must be within 10% of a judged attempt's median. Every judged attempt
// missing fails; no judged attempt at all skips, saying so (never a pass).
TEST(ClosedLoop, DefaultJobPredictsItsOwnStepWithinTenPercent) {
  constexpr double kSteady = 0.15, kDrift = 0.10;
  std::string unsteady;
  for (const char* precision : {"fp32", "bf16"}) {
    SCOPED_TRACE(precision);
    bool judged = false, within = false;
    double worst = 1;  // predicted / measured of the judged attempt furthest from 1
    for (int k = 1; k <= 3 && !within; ++k) {
      const Attempt a = attempt(precision, k);
      if (!a.ran) return;  // the run itself failed: reported above
      if (a.spread > kSteady || std::abs(a.drift) > kDrift) continue;
      judged = true;
      within = std::abs(a.ratio - 1) <= 0.10;
      if (std::abs(a.ratio - 1) > std::abs(worst - 1)) worst = a.ratio;
    }
    if (!judged) {
      unsteady += std::string(unsteady.empty() ? "" : ", ") + precision;
      continue;
    }
    EXPECT_TRUE(within) << "every judged attempt missed 10%; the furthest: predicted/measured "
                        << worst;
  }
  if (!unsteady.empty())
    GTEST_SKIP() << "this machine was not steady in any attempt (" << unsteady
                 << "): its steps spread more than 15%, or its speed moved more than 10% between "
                    "the probe and the "
                    "run; a 10% prediction cannot be judged";
}

}  // namespace
}  // namespace crucible::e2e
