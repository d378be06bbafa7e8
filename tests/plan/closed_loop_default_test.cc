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
};

// One attempt: a fresh run that measures this machine itself.
Attempt attempt(const char* precision, int k) {
  TempDir dir(std::string("closed_loop_") + precision + "_" + std::to_string(k));
  // This machine measured now, by the run, not reused from the suite's
  // cache (which other tests wrote while the machine was busy).
  ::setenv("CRUCIBLE_CACHE_DIR", (dir / "cache").c_str(), 1);
  ::unsetenv("OMP_WAIT_POLICY");
  auto r =
      run_crucible({"train", "--run-dir", dir / "run", "--set", "train.steps=40", "--set",
                    "run.sample_tokens=0", "--set", std::string("train.precision=") + precision},
                   dir.path());
  ::unsetenv("CRUCIBLE_CACHE_DIR");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("[probe] measuring this machine"), std::string::npos) << r.output;
  auto plan = read_json(dir / "run/plan.json");
  EXPECT_TRUE(plan.is_ok());
  if (r.code != 0 || !plan.is_ok() || !plan->contains("step_time_s")) return {};
  const double predicted_ms = (*plan)["step_time_s"].get<double>() * 1e3;
  const Steps s = measured_steps(dir / "run");
  EXPECT_GT(s.median_ms, 0);
  if (!(s.median_ms > 0)) return {};
  std::printf(
      "[closed loop] %s, attempt %d: predicted %.1f ms/step, measured median %.1f ms (%+.1f%%), "
      "steps' spread %.0f%%\n",
      precision, k, predicted_ms, s.median_ms, 100 * (predicted_ms / s.median_ms - 1),
      100 * s.spread);
  return {true, predicted_ms / s.median_ms, s.spread};
}

// A shared VM's speed moves by more than the model's error: three identical
// default fp32 runs on a 2-vCPU Xeon VM measured step medians of 439, 600
// and 664 ms while the host took time from it (steal), their steps' spread
// (interquartile range over the median) 11%, 28% and 80%. A median from a
// run that unsteady cannot judge a 10% prediction. So: up to three fresh
// attempts (each probing anew); an attempt whose steps spread by more than
// 15% is not a judgement; the prediction must be within 10% of a steady
// attempt's median. Every steady attempt missing fails; no steady attempt at
// all skips, saying so (never a pass).
TEST(ClosedLoop, DefaultJobPredictsItsOwnStepWithinTenPercent) {
  constexpr double kSteady = 0.15;
  std::string unsteady;
  for (const char* precision : {"fp32", "bf16"}) {
    SCOPED_TRACE(precision);
    bool judged = false, within = false;
    double worst = 1;  // predicted / measured of the steady attempt furthest from 1
    for (int k = 1; k <= 3 && !within; ++k) {
      const Attempt a = attempt(precision, k);
      if (!a.ran) return;  // the run itself failed: reported above
      if (a.spread > kSteady) continue;
      judged = true;
      within = std::abs(a.ratio - 1) <= 0.10;
      if (std::abs(a.ratio - 1) > std::abs(worst - 1)) worst = a.ratio;
    }
    if (!judged) {
      unsteady += std::string(unsteady.empty() ? "" : ", ") + precision;
      continue;
    }
    EXPECT_TRUE(within) << "every steady attempt missed 10%; the furthest: predicted/measured "
                        << worst;
  }
  if (!unsteady.empty())
    GTEST_SKIP() << "this machine was not steady in any attempt (" << unsteady
                 << "): steps spread more than 15%, a 10% prediction cannot be judged";
}

}  // namespace
}  // namespace crucible::e2e
