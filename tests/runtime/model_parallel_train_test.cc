// Model parallelism end to end: `crucible launch -n N -- train` with
// dist.pp > 1 and dist.tp > 1 (real Open MPI processes, oversubscribed on
// this machine) against one process with the same global batch, for every
// schedule, with data parallelism and ZeRO-1 on top; a checkpoint of any
// layout resumes at another and continues the same run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "runtime/config.h"
#include "runtime/memory_estimate.h"
#include "support/cli_runner.h"
#include "support/train_config.h"
#include "support/weights.h"

namespace crucible::e2e {
namespace {

using testutil::weight_difference;

std::string make_config(const TempDir& dir) {
  testutil::SmallRun run;
  run.steps = 20;
  run.batch = 2;
  run.accum = 4;
  run.seed = 11;
  run.eval_every = 10;
  run.eval_batches = 2;
  run.ckpt_every = 10;
  run.keep = 2;
  run.name = "pp";
  run.sample_tokens = 0;
  run.extra = "[dist]\nbucket_mb = 0.02\n";
  return testutil::write_small_config(dir, run, "cfg.toml");
}

void expect_same_run(const std::string& single, const std::string& multi, double tol, size_t steps = 20) {
  auto a = metric_rows(single + "/metrics.jsonl"), b = metric_rows(multi + "/metrics.jsonl");
  ASSERT_EQ(a.size(), steps);
  ASSERT_EQ(b.size(), steps);
  int evals = 0;
  for (size_t i = 0; i < steps; ++i) {
    const double la = a[i]["loss"].get<double>(), lb = b[i]["loss"].get<double>();
    EXPECT_NEAR(lb, la, tol * std::fabs(la)) << multi << ": loss of step " << i + 1;
    EXPECT_NEAR(b[i]["grad_norm"].get<double>(), a[i]["grad_norm"].get<double>(),
                1e-4 * a[i]["grad_norm"].get<double>())
        << multi << ": grad_norm of step " << i + 1;
    ASSERT_EQ(a[i].contains("val_loss"), b[i].contains("val_loss"));
    if (a[i].contains("val_loss")) {
      ++evals;
      EXPECT_NEAR(b[i]["val_loss"].get<double>(), a[i]["val_loss"].get<double>(),
                  tol * a[i]["val_loss"].get<double>())
          << multi << ": val_loss of step " << i + 1;
    }
  }
  EXPECT_EQ(evals, 2);
  const std::string ckpt = "/ckpt/step_" + std::string(7 - std::to_string(steps).size(), '0') + std::to_string(steps);
  const double w = weight_difference(single + ckpt + "/model.safetensors", export_weights(multi, int64_t(steps)));
  EXPECT_LE(w, tol) << multi;
  std::printf("[pipeline test] %s: weights differ by %.3g (relative L2)\n", multi.c_str(), w);
}

struct Case {
  const char* name;
  int ranks;
  std::vector<std::string> sets;
};

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Runs each case and checks it against the one-process run `one`: the same
// losses, gradient norms, validation and final weights; each rank measured
// what its layout has it measure (metric), and the up-front estimate of its
// memory (its part, its schedule's contexts in flight) held.
void expect_layouts_equal_one_rank(const TempDir& dir, const std::string& cfg, const std::string& one,
                                   const std::vector<std::string>& model, const std::vector<Case>& cases,
                                   const std::string& metric) {
  for (const Case& c : cases) {
    const std::string run = dir / c.name;
    std::vector<std::string> args = with({cfg, "--run-dir", run}, model);
    for (const std::string& s : c.sets) args.insert(args.end(), {"--set", s});
    auto r = run_crucible(launch_train(c.ranks, args));
    ASSERT_EQ(r.code, 0) << c.name << "\n" << r.output;
    if (metric == "pipeline_wait_ms") {
      EXPECT_NE(r.output.find("[pipeline] bubble"), std::string::npos) << r.output;
      // The report's timeline draws every stage's actions.
      const std::string html = read_file(run + "/report.html");
      EXPECT_NE(html.find("<section id=\"pipeline\">"), std::string::npos) << c.name;
      for (int r = 0; r < c.ranks; ++r)
        EXPECT_NE(html.find("data-series=\"rank " + std::to_string(r) + "\"><rect"), std::string::npos)
            << c.name << ": no actions of rank " << r << " in the pipeline timeline";
    }
    expect_same_run(one, run, 1e-5);
    auto resolved = runtime::load_config(run + "/config.toml");
    ASSERT_TRUE(resolved) << resolved.status().message();
    for (int r = 0; r < c.ranks; ++r) {
      uint64_t peak = 0;
      bool measured = false;
      for (const auto& row : metric_rows(run + "/metrics.rank" + std::to_string(r) + ".jsonl")) {
        peak = std::max(peak, row["mem_peak"].get<uint64_t>());
        measured = measured || row.contains(metric);
      }
      EXPECT_TRUE(measured) << c.name << " rank " << r << ": no " << metric;
      const uint64_t est = runtime::estimate_memory(*resolved, c.ranks, r).allocator_bytes();
      EXPECT_LE(peak, est) << c.name << " rank " << r << ": the allocator's peak is above the estimate";
    }
  }
}

// Every schedule at pp = 2, interleaved with two chunks per rank, pipeline
// with data parallelism (and ZeRO-1 on it), four stages.
TEST(PipelineTrain, EveryScheduleEqualsOneRankWithTheSameGlobalBatch) {
  TempDir dir("pp_equiv");
  const std::string cfg = make_config(dir);
  // Four blocks: two per stage at pp = 2, one per chunk interleaved (v = 2) and at pp = 4.
  const std::vector<std::string> four_layers = {"--set", "model.n_layer=4"};
  auto one = run_crucible(with({"train", cfg, "--run-dir", dir / "one", "--set", "train.threads=1"}, four_layers));
  ASSERT_EQ(one.code, 0) << one.output;
  expect_layouts_equal_one_rank(dir, cfg, dir / "one", four_layers,
                                {
                                    {"1f1b", 2, {"dist.pp=2"}},
                                    {"zbh1", 2, {"dist.pp=2", "dist.pp_schedule=zb-h1"}},
                                    {"zbh1_fused_head", 2, {"dist.pp=2", "dist.pp_schedule=zb-h1", "train.fused_head=true"}},
                                    {"interleaved", 2, {"dist.pp=2", "dist.pp_schedule=interleaved", "dist.pp_virtual=2"}},
                                    {"pp4", 4, {"dist.pp=4"}},
                                    // The cost split: 3 blocks and 1 + the head (1.3 blocks' worth here).
                                    {"1f1b_cost", 2, {"dist.pp=2", "dist.pp_split=cost"}},
                                    {"dp2pp2_zero1", 4, {"dist.pp=2", "dist.zero=1", "train.grad_accum=2"}},
                                    {"pp4_zbh1", 4, {"dist.pp=4", "dist.pp_schedule=zb-h1"}},
                                    {"dp2pp2_interleaved_zero1", 4,
                                     {"dist.pp=2", "dist.pp_schedule=interleaved", "dist.pp_virtual=2", "dist.zero=1",
                                      "train.grad_accum=2"}},
                                },
                                "pipeline_wait_ms");
}

// Tensor parallelism over a vocabulary that divides by neither 2 nor 4
// (509), alone, at tp = 4, under data parallelism with ZeRO-1, and with a
// pipeline under each schedule, and with sequence parallelism: the same run
// as one process.
TEST(TensorParallelTrain, EveryLayoutEqualsOneRankWithTheSameGlobalBatch) {
  TempDir dir("tp_equiv");
  const std::string cfg = make_config(dir);
  const std::vector<std::string> model = {"--set", "model.n_layer=4", "--set", "model.n_head=4",
                                          "--set", "model.vocab_size=509"};
  auto one = run_crucible(with({"train", cfg, "--run-dir", dir / "one", "--set", "train.threads=1"}, model));
  ASSERT_EQ(one.code, 0) << one.output;
  expect_layouts_equal_one_rank(dir, cfg, dir / "one", model,
                                {
                                    {"tp2", 2, {"dist.tp=2"}},
                                    {"tp4", 4, {"dist.tp=4"}},
                                    {"dp2tp2_zero1", 4, {"dist.tp=2", "dist.zero=1", "train.grad_accum=2"}},
                                    {"tp2pp2", 4, {"dist.tp=2", "dist.pp=2"}},
                                    {"tp2pp2_zbh1", 4, {"dist.tp=2", "dist.pp=2", "dist.pp_schedule=zb-h1"}},
                                    {"tp2pp2_interleaved", 4,
                                     {"dist.tp=2", "dist.pp=2", "dist.pp_schedule=interleaved", "dist.pp_virtual=2"}},
                                    {"tp2_sp", 2, {"dist.tp=2", "dist.sequence_parallel=true"}},
                                    {"tp2_sp_fused_head", 2,
                                     {"dist.tp=2", "dist.sequence_parallel=true", "train.fused_head=true"}},
                                    {"dp2tp2_sp_zero1", 4,
                                     {"dist.tp=2", "dist.sequence_parallel=true", "dist.zero=1", "train.grad_accum=2"}},
                                    {"tp2pp2_sp_zbh1", 4,
                                     {"dist.tp=2", "dist.pp=2", "dist.pp_schedule=zb-h1", "dist.sequence_parallel=true"}},
                                },
                                "tp_comm_ms");
}

// A checkpoint holds the whole model by name whatever layout wrote it: a
// pipeline run stopped at step 10 resumes in one process, and a one-process
// run stopped at step 10 resumes as a two-stage pipeline (interleaved) with
// data parallelism; both continue the uninterrupted run.
TEST(PipelineTrain, CheckpointsResumeAtAnotherLayout) {
  TempDir dir("pp_reshard");
  const std::string cfg = make_config(dir);
  const std::vector<std::string> base = {cfg, "--set", "model.n_layer=4", "--set", "train.threads=1"};
  auto train = [&](const std::string& run, std::vector<std::string> more, int ranks) {
    std::vector<std::string> a = base;
    a.insert(a.end(), {"--run-dir", run});
    a.insert(a.end(), more.begin(), more.end());
    if (ranks == 1) {
      a.insert(a.begin(), "train");
      return run_crucible(a);
    }
    return run_crucible(launch_train(ranks, a));
  };
  auto one = train(dir / "one", {}, 1);
  ASSERT_EQ(one.code, 0) << one.output;

  const std::string a = dir / "pp_then_one";
  auto first = train(a, {"--set", "dist.pp=2", "--stop-at", "10"}, 2);
  ASSERT_EQ(first.code, 0) << first.output;
  // The pipeline's checkpoint samples like any other (the whole model by name).
  auto sample = run_crucible({"generate", a, "--tokens", "4"});
  EXPECT_EQ(sample.code, 0) << sample.output;
  auto rest = train(a, {"--resume"}, 1);
  ASSERT_EQ(rest.code, 0) << rest.output;
  EXPECT_NE(rest.output.find("written by 2 ranks, now 1"), std::string::npos) << rest.output;
  expect_same_run(dir / "one", a, 1e-5);

  const std::string b = dir / "one_then_pp";
  auto start = train(b, {"--stop-at", "10"}, 1);
  ASSERT_EQ(start.code, 0) << start.output;
  auto more = train(b,
                    {"--resume", "--set", "dist.pp=2", "--set", "dist.pp_schedule=interleaved", "--set",
                     "dist.pp_virtual=2", "--set", "train.grad_accum=2"},
                    4);
  ASSERT_EQ(more.code, 0) << more.output;
  expect_same_run(dir / "one", b, 1e-5);
}

// One run through six layouts, resharded at every checkpoint: tp x pp =
// 2 x 2, then tp = 4 (sequence parallel), dp 2 x tp 2 under ZeRO-1 (each
// rank writes its shard of the moments), one process, pp = 4 and dp = 4
// under ZeRO-2, three steps each (the last five of the 20); the loss
// curve, validation and final weights are the uninterrupted run's.
TEST(TensorParallelTrain, OneRunReshardsThroughSixLayouts) {
  TempDir dir("tp_reshard");
  const std::string cfg = make_config(dir);
  const std::vector<std::string> base = {cfg, "--set", "model.n_layer=4", "--set", "model.n_head=4",
                                         "--set", "model.vocab_size=509", "--set", "train.threads=1"};
  auto one = run_crucible(with(with({"train"}, base), {"--run-dir", dir / "one"}));
  ASSERT_EQ(one.code, 0) << one.output;
  const std::string run = dir / "resharded";
  const std::vector<std::pair<int, std::vector<std::string>>> legs = {
      {4, {"dist.tp=2", "dist.pp=2"}},
      {4, {"dist.tp=4", "dist.sequence_parallel=true"}},
      {4, {"dist.tp=2", "dist.zero=1", "train.grad_accum=2"}},
      {1, {}},
      {4, {"dist.pp=4"}},
      {4, {"dist.zero=2", "train.grad_accum=1"}}};
  for (size_t i = 0; i < legs.size(); ++i) {
    std::vector<std::string> args = with(base, {"--run-dir", run});
    if (i > 0) args.push_back("--resume");
    if (i + 1 < legs.size()) args.insert(args.end(), {"--stop-at", std::to_string(3 * (i + 1))});
    for (const std::string& s : legs[i].second) args.insert(args.end(), {"--set", s});
    auto r = legs[i].first == 1 ? run_crucible(with({"train"}, args)) : run_crucible(launch_train(legs[i].first, args));
    ASSERT_EQ(r.code, 0) << "leg " << i << "\n" << r.output;
    // The ZeRO legs' checkpoints: each rank's shard of the moments in its own file.
    if (i == 2) {
      EXPECT_TRUE(std::filesystem::exists(run + "/ckpt/step_0000009/optimizer.part-1.dp-1.safetensors"));
    }
  }
  EXPECT_TRUE(std::filesystem::exists(run + "/ckpt/step_0000020/optimizer.dp-3.safetensors"));
  expect_same_run(dir / "one", run, 1e-5);
}

// A model whose weights, gradients, optimizer state and checkpoint copy do
// not fit train.memory_limit_gb on one rank (~147 MB against 90 MB) is
// refused before anything is written, with the layouts that would fit; at
// tp = 2 (~76 MB a rank) it trains, each rank's allocator within the budget.
TEST(ModelParallelMemory, TooLargeForOneRankIsRefusedAndTrainsAtTp2) {
  TempDir dir("mp_memory");
  const std::string cfg = make_config(dir);
  const std::vector<std::string> big = {cfg, "--set", "model.n_layer=4", "--set", "model.n_embd=256", "--set", "model.n_head=4",
                                        "--set", "model.vocab_size=4096", "--set", "data.vocab_size=512",
                                        "--set", "train.steps=4", "--set", "train.memory_limit_gb=0.09"};
  auto one = run_crucible(with(with({"train"}, big), {"--run-dir", dir / "one"}));
  EXPECT_EQ(one.code, 2) << one.output;
  EXPECT_NE(one.output.find("[memory] train.memory_limit_gb = 90 MB per rank, but this run needs ~1"), std::string::npos)
      << one.output;
  EXPECT_NE(one.output.find("layouts that fit, per rank: tp=2 pp=1 ("), std::string::npos) << one.output;
  EXPECT_EQ(one.output.find("tp=1 pp=2 ("), std::string::npos) << "pp = 2 does not fit 90 MB here\n" << one.output;
  EXPECT_FALSE(std::filesystem::exists(dir / "one"));
  const std::string run = dir / "tp2";
  auto tp2 = run_crucible(launch_train(2, with(big, {"--run-dir", run, "--set", "dist.tp=2"})));
  ASSERT_EQ(tp2.code, 0) << tp2.output;
  for (int r = 0; r < 2; ++r) {
    uint64_t peak = 0;
    for (const auto& row : metric_rows(run + "/metrics.rank" + std::to_string(r) + ".jsonl"))
      peak = std::max(peak, row["mem_peak"].get<uint64_t>());
    EXPECT_GT(peak, 0u);
    EXPECT_LE(peak, 90'000'000u) << "rank " << r;
  }
}

}  // namespace
}  // namespace crucible::e2e
