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
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/json_io.h"
#include "support/cli_runner.h"
#include "support/files.h"

namespace crucible::e2e {
namespace {

using testutil::TempDir;

double median_step_ms(const std::string& run) {
  std::vector<double> v;
  for (const nlohmann::json& r : metric_rows(run + "/metrics.jsonl"))
    if (r.value("step", 0) > 2) v.push_back(r.value("step_ms", 0.0));
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

TEST(ClosedLoop, DefaultJobPredictsItsOwnStepWithinTenPercent) {
  for (const char* precision : {"fp32", "bf16"}) {
    SCOPED_TRACE(precision);
    TempDir dir(std::string("closed_loop_") + precision);
    // This machine measured now, by the run, not reused from the suite's
    // cache (which other tests wrote while the machine was busy).
    ::setenv("CRUCIBLE_CACHE_DIR", (dir / "cache").c_str(), 1);
    ::unsetenv("OMP_WAIT_POLICY");
    auto r = run_crucible({"train", "--run-dir", dir / "run", "--set", "train.steps=40", "--set",
                           "run.sample_tokens=0", "--set", std::string("train.precision=") + precision},
                          dir.path());
    ::unsetenv("CRUCIBLE_CACHE_DIR");
    ASSERT_EQ(r.code, 0) << r.output;
    EXPECT_NE(r.output.find("[probe] measuring this machine"), std::string::npos) << r.output;
    auto plan = read_json(dir / "run/plan.json");
    ASSERT_TRUE(plan.is_ok());
    ASSERT_TRUE(plan->contains("step_time_s")) << plan->dump();
    const double predicted_ms = (*plan)["step_time_s"].get<double>() * 1e3;
    const double measured_ms = median_step_ms(dir / "run");
    ASSERT_GT(measured_ms, 0);
    std::printf("[closed loop] %s: predicted %.1f ms/step, measured median %.1f ms (%+.1f%%)\n", precision,
                predicted_ms, measured_ms, 100 * (predicted_ms / measured_ms - 1));
    EXPECT_NEAR(predicted_ms / measured_ms, 1.0, 0.10) << r.output;
  }
}

}  // namespace
}  // namespace crucible::e2e
