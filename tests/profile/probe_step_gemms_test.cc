// A run's GEMMs timed inside a replayed step (profile/probe_step_gemms.h):
// the calls runtime::run_step_gemms lists are the step's own (the flops the
// time model counts, under the planner's shapes), and the probe gives each
// planner shape one checked row.
#include "profile/probe_step_gemms.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <tuple>

#include "plan/time_model.h"
#include "runtime/plan_run.h"

namespace crucible::profile {
namespace {

runtime::Config small_config() {
  runtime::Config cfg;
  cfg.model.n_layer = 3;
  cfg.model.n_head = 2;
  cfg.model.n_embd = 64;
  cfg.model.vocab_size = 1000;
  cfg.model.seq_len = 32;
  cfg.train.batch_size = 4;
  return cfg;
}

using Shape = std::tuple<int, int, int>;

// Every call counts toward a shape the time model prices, and the calls'
// flops are the model's: forward (m, n, k) and backward (m, k, n) + (k, n, m)
// of each of plan::forward_gemms' shapes, blocks times for a block's.
void expect_calls_are_the_models(const runtime::Config& cfg, int world) {
  const StepGemms step = runtime::run_step_gemms(cfg, world);
  std::set<Shape> priced;
  double model_flops = 0;
  const int blocks = cfg.model.n_layer / cfg.dist.pp;
  for (const plan::GemmShape& g : plan::forward_gemms(cfg.model, runtime::candidate_of(cfg, world))) {
    const int m = int(g.m), n = int(g.n), k = int(g.k);
    priced.insert({m, n, k}), priced.insert({m, k, n}), priced.insert({k, n, m});
    model_flops += 3 * 2.0 * g.m * g.n * g.k * (g.block ? blocks : 1);
  }
  double step_flops = 0;
  for (const StepGemm& c : step.calls) {
    EXPECT_TRUE(priced.count({c.m, c.n, c.k})) << c.m << "x" << c.n << "x" << c.k;
    // The call is the shape or (the fused head) a chunk of its rows, or its
    // transpose (the tied head's weight gradient is (V, C), the model's (C, V)).
    const double call = 2.0 * c.call.m * c.call.n * c.call.k;
    EXPECT_LE(call, 2.0 * c.m * c.n * c.k + 0.5);
    step_flops += call * (c.block ? blocks : 1);
  }
  EXPECT_EQ(step.blocks, blocks);
  EXPECT_NEAR(step_flops, model_flops, 1e-9 * model_flops);
}

TEST(StepGemms, TheStepsCallsAreTheFlopsThePlannerCounts) {
  runtime::Config cfg = small_config();
  for (const char* precision : {"fp32", "bf16"})
    for (bool fused : {false, true}) {
      SCOPED_TRACE(std::string(precision) + (fused ? " fused head" : ""));
      cfg.train.precision = precision;
      cfg.train.fused_head = fused;
      expect_calls_are_the_models(cfg, 1);
    }
  // The fused head runs its three GEMMs in forward, a chunk of rows at a time.
  cfg.model.vocab_size = 100000;  // 32 MB of f32 logits hold 83 rows: chunks of 80
  cfg.train.fused_head = true;
  const StepGemms fused = runtime::run_step_gemms(cfg, 1);
  int head_calls = 0;
  for (const StepGemm& c : fused.calls)
    if (!c.block) {
      ++head_calls;
      EXPECT_FALSE(c.backward);
    }
  EXPECT_EQ(head_calls, 3 * ((4 * 32 + 79) / 80));
  expect_calls_are_the_models(cfg, 1);
  // Tensor parallel: each rank's shard of the shapes.
  cfg.model.vocab_size = 1000;
  cfg.dist.tp = 2;
  expect_calls_are_the_models(cfg, 2);
}

TEST(StepGemms, EachPlannerShapeGetsOneCheckedRowMeasuredInTheStep) {
  runtime::Config cfg = small_config();
  for (const char* precision : {"fp32", "bf16"}) {
    SCOPED_TRACE(precision);
    cfg.train.precision = precision;
    const bool bf16 = cfg.train.precision == "bf16";
    const StepGemms step = runtime::run_step_gemms(cfg, 1);
    const std::vector<nlohmann::json> rows = measure_step_gemms(step, bf16, 1, 0.01, 1e3);
    std::set<Shape> keys;
    for (const StepGemm& c : step.calls) keys.insert({c.m, c.n, c.k});
    ASSERT_EQ(rows.size(), keys.size());
    for (const nlohmann::json& r : rows) {
      EXPECT_TRUE(keys.count({r["m"].get<int>(), r["n"].get<int>(), r["k"].get<int>()})) << r.dump();
      EXPECT_TRUE(gemm_row_is_in_step(r)) << r.dump();
      EXPECT_TRUE(r["valid"].get<bool>()) << r.dump();
      EXPECT_EQ(r["dtype"], bf16 ? "bf16" : "f32");
      EXPECT_GT(r["gflops"].get<double>(), 0.0);
      EXPECT_NEAR(r["fraction_of_peak"].get<double>(), r["gflops"].get<double>() / 1e3, 1e-12);
    }
  }
  EXPECT_FALSE(gemm_row_is_in_step(nlohmann::json{{"form", {"trans_a", "cold"}}}));
}

// The step's attention, timed at its shape on this rank (a tensor-parallel
// rank: its heads' share), in both precisions.
TEST(StepGemms, TheStepsAttentionIsMeasuredAtItsShape) {
  runtime::Config cfg = small_config();
  const StepGemms step = runtime::run_step_gemms(cfg, 1);
  EXPECT_EQ(step.attention.B, cfg.train.batch_size);
  EXPECT_EQ(step.attention.T, cfg.model.seq_len);
  EXPECT_EQ(step.attention.C, cfg.model.n_embd);
  EXPECT_EQ(step.attention.NH, cfg.model.n_head);
  for (bool bf16 : {false, true}) {
    const nlohmann::json row = measure_step_attention(step.attention, bf16, 1, 0.01, 1e3);
    EXPECT_TRUE(row["valid"].get<bool>()) << row.dump();
    EXPECT_TRUE(gemm_row_is_in_step(row)) << row.dump();
    EXPECT_EQ(row["dtype"], bf16 ? "bf16" : "f32");
    EXPECT_EQ(row["T"], cfg.model.seq_len);
    EXPECT_GT(row["gflops"].get<double>(), 0.0);
  }
  cfg.dist.tp = 2;
  const StepGemms tp = runtime::run_step_gemms(cfg, 2);
  EXPECT_EQ(tp.attention.C, cfg.model.n_embd / 2);
  EXPECT_EQ(tp.attention.NH, cfg.model.n_head / 2);
}

}  // namespace
}  // namespace crucible::profile
