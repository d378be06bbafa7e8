// `plan --calibrate`'s fit on runs whose truth is known: the measurement is
// what a cluster with other efficiencies predicts, and the calibrated
// cluster must then predict each run's step. Two kinds of measurement: a run
// split into phases (forward, backward, optimizer, the loader's wait), and a
// GPU run replayed from a CUDA graph, which measured its device step whole.
#include "plan/calibrate.h"

#include <gtest/gtest.h>

#include <cmath>

#include "plan/plan_fixtures.h"
#include "plan/time_model.h"

namespace crucible::plan {
namespace {

// `start` with every efficiency the fit may move scaled by f: what the runs
// "really" reach.
Cluster slower(Cluster c, double f) {
  for (auto& table : c.device.gemm_efficiency)
    for (Device::GemmPoint& g : table) g.efficiency *= f;
  c.device.memory_efficiency *= f;
  return c;
}

Candidate one_device(const char* precision) {
  Candidate c;
  c.mb = 4, c.m = 2, c.precision = precision;
  return c;
}

// The loader's wait is the run's own (a measured 20 ms per step), not folded
// into the step's overhead nor dropped: the calibrated file predicts it.
TEST(Calibrate, TheLoadersMeasuredWaitIsPredictedAfterward) {
  const nn::GPTConfig model = workload("gpt2-124M");
  const Cluster start = toy();
  const Prediction truth = predict(model, one_device("bf16"), slower(start, 0.6));
  ASSERT_TRUE(truth.divides) << truth.why_not;
  Observation o;
  o.run = "phased";
  o.model = model, o.layout = one_device("bf16");
  const Breakdown& b = truth.breakdown;
  o.measured.forward = b.forward, o.measured.backward = b.backward,
  o.measured.optimizer = b.optimizer;
  o.measured.data_wait = 0.020;
  o.measured.step = truth.step_time_s + 0.020;
  o.measured.steps = 50;
  auto cal = calibrate(start, {o});
  ASSERT_TRUE(cal) << cal.status().message();
  EXPECT_NEAR(cal->cluster.data_wait_s, 0.020, 1e-12);
  const Prediction after = predict(model, o.layout, cal->cluster);
  EXPECT_NEAR(after.step_time_s / o.measured.step, 1.0, 0.01) << cal->report;
  EXPECT_NEAR(after.breakdown.data_wait, 0.020, 1e-12);
  EXPECT_GT(cal->median_error_before, 0.2)
      << "the start already predicted the run: the test proves nothing";
  EXPECT_LT(cal->median_error_after, 0.01) << cal->report;
}

// A replayed run's phases are 0 (metrics.jsonl has graph_ms instead): the
// device step scales compute and optimizer alike, the run is predicted as a
// graph (one launch, not one per kernel), and the fit lowers the GEMM
// efficiencies rather than reading 0 ms of compute as infinitely fast.
TEST(Calibrate, AStepReplayedFromACudaGraphIsFittedByItsWholeDeviceTime) {
  const nn::GPTConfig model = workload("gpt2-124M");
  auto h100 = load_cluster(shipped("dgx-h100"));
  ASSERT_TRUE(h100) << h100.status().message();
  Cluster start = *h100;
  start.stack.launch_s = 50e-6;  // launch-bound without a graph: the two predictions differ
  Cluster as_graph = slower(start, 0.7);
  as_graph.stack.graphs = true;
  const Prediction truth = predict(model, one_device("bf16"), as_graph);
  ASSERT_TRUE(truth.divides) << truth.why_not;
  const Breakdown& b = truth.breakdown;
  Observation o;
  o.run = "replayed";
  o.model = model, o.layout = one_device("bf16");
  o.measured.graph = b.forward + b.backward + b.optimizer;
  o.measured.step = truth.step_time_s;
  o.measured.steps = 50;
  auto cal = calibrate(start, {o});
  ASSERT_TRUE(cal) << cal.status().message();
  Cluster fitted = cal->cluster;
  EXPECT_FALSE(fitted.stack.graphs)
      << "the file's own stack is kept; the run was predicted as it ran";
  fitted.stack.graphs = true;
  const Prediction after = predict(model, o.layout, fitted);
  EXPECT_NEAR(after.step_time_s / o.measured.step, 1.0, 0.02) << cal->report;
  EXPECT_LT(fitted.device.memory_efficiency, start.device.memory_efficiency);
  // The GEMMs at the run's shapes: slower than the datasheet file said.
  const int p = precision_index("bf16");
  double before_eff = 0, after_eff = 0;
  for (const GemmShape& g : forward_gemms(model, o.layout)) {
    before_eff += start.device.gemm_efficiency_at(p, g.m, g.n, g.k);
    after_eff += fitted.device.gemm_efficiency_at(p, g.m, g.n, g.k);
  }
  EXPECT_LT(after_eff, 0.85 * before_eff);
  EXPECT_GT(after_eff, 0.5 * before_eff);
}

}  // namespace
}  // namespace crucible::plan
