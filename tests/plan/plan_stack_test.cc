// The planner's GPU terms (docs/plan.md, "The stack" and "A GPU node's
// file"): tensor-parallel sums in bf16, overlapped tensor-parallel time,
// launch-bound chunks, and a GPU node's cluster file from its probe, each
// against its formula or the probe's figures.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "plan/cluster.h"
#include "plan/plan_fixtures.h"
#include "plan/time_model.h"

namespace crucible::plan {
namespace {

// The stack's terms (docs/plan.md, "The stack"), each against its formula.
TEST(PlanTextbook, TensorParallelSumsInBf16TakeHalfTheBytes) {
  const nn::GPTConfig m = workload("gpt2-124M");
  Cluster cl = toy();
  Candidate c;
  c.tp = 4, c.mb = 4, c.m = 1, c.precision = "bf16";
  const double f32 = predict(m, c, cl).breakdown.tp_comm;
  cl.stack.tp_comm_working = true;
  const double b16 = predict(m, c, cl).breakdown.tp_comm;
  // Per block: two allreduces of (M, C) each way; the head's sums unchanged.
  const double M = 4.0 * m.seq_len, C = m.n_embd, L = m.n_layer;
  const double per_block = [&](double bytes) {
    return 2 * 2 * cl.intra.time(Collective::kAllreduce, M * C * bytes, 4);
  }(4) - [&](double bytes) {
    return 2 * 2 * cl.intra.time(Collective::kAllreduce, M * C * bytes, 4);
  }(2);
  EXPECT_NEAR(f32 - b16, L * per_block, 1e-9 * f32);
  EXPECT_GT(b16, 0);
}

TEST(PlanTextbook, OverlappedTensorParallelTimeIsHiddenUpToTheGemms) {
  const nn::GPTConfig m = workload("gpt2-124M");
  Cluster cl = toy();
  cl.intra = cl.inter;  // a slow link: the all-reduces outlast the GEMMs
  Candidate c;
  c.tp = 4, c.mb = 1, c.m = 1;
  const Prediction none = predict(m, c, cl);
  cl.stack.tp_overlap = 1;
  const Prediction all = predict(m, c, cl);
  cl.stack.tp_overlap = 0.5;
  const Prediction half = predict(m, c, cl);
  // Hidden: min(overlap x tp, the block's GEMMs) each way, per block.
  const double gemms_f = none.breakdown.forward, tp = none.breakdown.tp_comm;
  EXPECT_LT(all.breakdown.tp_comm, tp);
  EXPECT_GT(all.breakdown.tp_comm, 0)
      << "a slow link's all-reduces outlast the GEMMs that hide them";
  EXPECT_LT(tp - all.breakdown.tp_comm, 2 * gemms_f)
      << "never more than forward and backward GEMMs hide";
  EXPECT_NEAR(tp - half.breakdown.tp_comm, std::min(tp - all.breakdown.tp_comm, 0.5 * tp),
              1e-9 * tp);
  EXPECT_EQ(all.breakdown.forward, none.breakdown.forward);
}

TEST(PlanTextbook, LaunchBoundChunksWaitForTheHostUnlessGraphed) {
  const nn::GPTConfig m = workload("tiny");
  Cluster cl = toy();
  Candidate c;
  c.mb = 1, c.m = 2;
  const Prediction gpu_bound = predict(m, c, cl);
  cl.stack.launch_s = 1e-3;  // far slower than the tiny model's kernels
  const Prediction eager = predict(m, c, cl);
  // The blocks' share of a chunk becomes its launches' time (forward 8 per
  // block, backward 16): more than before, by less than all the launches.
  const double fwd_launches = c.m * m.n_layer * 8 * 1e-3,
               bwd_launches = c.m * m.n_layer * 16 * 1e-3;
  EXPECT_GE(eager.breakdown.forward, fwd_launches);
  EXPECT_LT(eager.breakdown.forward, gpu_bound.breakdown.forward + fwd_launches);
  EXPECT_GE(eager.breakdown.backward, bwd_launches);
  // Graphed: one launch per chunk and direction.
  cl.stack.graphs = true;
  const Prediction graphed = predict(m, c, cl);
  EXPECT_LE(graphed.breakdown.forward, gpu_bound.breakdown.forward + c.m * 1e-3);
  EXPECT_GE(graphed.breakdown.forward, gpu_bound.breakdown.forward);
  EXPECT_LT(graphed.step_time_s, eager.step_time_s / 4);
  // Launches far faster than the kernels: no wait at all.
  cl.stack.launch_s = 1e-12, cl.stack.graphs = false;
  EXPECT_DOUBLE_EQ(predict(m, c, cl).breakdown.forward, gpu_bound.breakdown.forward);
}

// A GPU node's probe (its gpu section): the GPUs are the devices, at the
// ceilings the probe measured; the host link stages shared-GPU collectives.
TEST(ClusterFile, FromAGpuNodesProbe) {
  nlohmann::json probe = {{"schema", "crucible-probe/1"},
                          {"host", "gpu-box"},
                          {"cpu", {{"model", "CPU X"}, {"hardware_threads", 16}}},
                          {"compute",
                           {{"peak", {{"measured_fma_gflops_all", 1000.0}, {"threads_all", 16}}},
                            {"bf16_native", true},
                            {"gemm",
                             {{{"m", 512},
                               {"n", 512},
                               {"k", 512},
                               {"dtype", "f32"},
                               {"threads", 16},
                               {"gflops", 800.0},
                               {"valid", true}},
                              {{"m", 512},
                               {"n", 512},
                               {"k", 512},
                               {"dtype", "bf16"},
                               {"threads", 16},
                               {"gflops", 1600.0},
                               {"valid", true}}}}}},
                          {"memory", {{"threads_all", {{"triad", {{"best_gbs", 200.0}}}}}}},
                          {"topology", {{"numa_nodes", {{{"memory_bytes", 128e9}}}}}},
                          {"gpu",
                           {{"count", 1},
                            {"devices",
                             {{{"index", 0},
                               {"name", "NVIDIA H200"},
                               {"memory_bytes", 150e9},
                               {"gemm_n", 8192},
                               {"bf16_gemm_tflops", 780.0},
                               {"f32_gemm_tflops", 50.0},
                               {"copy_gbs", 4000.0},
                               {"h2d_pinned_gbs", 50.0},
                               {"d2h_pinned_gbs", 45.0},
                               {"launch_us", 2.5},
                               {"load", {{"mean_power_w", 640.0}}}}}}}}};
  auto c = cluster_from_probe(probe, "probe.json");
  ASSERT_TRUE(c) << c.status().message();
  EXPECT_FALSE(c->shared_node);
  EXPECT_EQ(c->devices_per_node, 1);
  EXPECT_EQ(c->device.name, "NVIDIA H200");
  EXPECT_DOUBLE_EQ(c->device.peak_flops[1], 780e12);
  EXPECT_DOUBLE_EQ(c->device.peak_flops[0], 50e12);
  ASSERT_EQ(c->device.gemm_efficiency[1].size(), 1u);
  EXPECT_EQ(c->device.gemm_efficiency[1][0].m, 8192);
  EXPECT_EQ(c->device.gemm_efficiency[0][0].m, 4096);
  EXPECT_DOUBLE_EQ(c->device.memory_bytes, 150e9);
  EXPECT_DOUBLE_EQ(c->device.memory_bandwidth_Bps, 4000e9);
  EXPECT_DOUBLE_EQ(c->device.power_w, 640.0);
  EXPECT_NEAR(c->stack.launch_s, 2.5e-6, 1e-15);
  EXPECT_DOUBLE_EQ(c->intra.kinds[0].bandwidth_Bps, 22.5e9)
      << "each collective crosses the host link twice";
  {
    // Two GPUs with direct peer access: NCCL's ring runs over their links,
    // as fast as the slowest pair; a pair staged by the driver keeps the
    // host link.
    nlohmann::json two = probe;
    two["gpu"]["count"] = 2;
    two["gpu"]["peers"] = {{{"from", 0}, {"to", 1}, {"access", true}, {"gbs", 370.0}},
                           {{"from", 1}, {"to", 0}, {"access", true}, {"gbs", 340.0}}};
    auto nvlink = cluster_from_probe(two, "probe.json");
    ASSERT_TRUE(nvlink) << nvlink.status().message();
    EXPECT_EQ(nvlink->devices_per_node, 2);
    EXPECT_DOUBLE_EQ(nvlink->intra.kinds[0].bandwidth_Bps, 340e9);
    two["gpu"]["peers"][1]["access"] = false;
    auto staged = cluster_from_probe(two, "probe.json");
    ASSERT_TRUE(staged) << staged.status().message();
    EXPECT_DOUBLE_EQ(staged->intra.kinds[0].bandwidth_Bps, 22.5e9);
  }
  // It writes a file its reader takes back.
  auto back = parse_cluster(cluster_toml(*c, ""), "h200.toml");
  ASSERT_TRUE(back) << back.status().message();
  EXPECT_DOUBLE_EQ(back->device.peak_flops[1], 780e12);
  // GPT-2 124M on it: a step, within its memory.
  Candidate cand;
  cand.mb = 16, cand.m = 1, cand.precision = "bf16";
  const Prediction pr = predict(workload("gpt2-124M"), cand, *c);
  EXPECT_TRUE(pr.runs) << pr.why_not;
  EXPECT_GT(pr.step_time_s, 0);
  // The step's shapes the probe timed join the table; one faster than the
  // square ceiling raises the peak.
  probe["gpu"]["devices"][0]["gemm"] = {
      {{"m", 16384}, {"n", 2304}, {"k", 768}, {"dtype", "bf16"}, {"tflops", 520.0}},
      {{"m", 16384}, {"n", 2304}, {"k", 768}, {"dtype", "f32"}, {"tflops", 45.0}},
      {{"m", 16384}, {"n", 2304}, {"k", 768}, {"dtype", "tf32"}, {"tflops", 300.0}},
      {{"m", 16384}, {"n", 50304}, {"k", 768}, {"dtype", "bf16"}, {"tflops", 800.0}}};
  auto shaped = cluster_from_probe(probe, "probe.json");
  ASSERT_TRUE(shaped) << shaped.status().message();
  EXPECT_DOUBLE_EQ(shaped->device.peak_flops[1], 800e12);
  ASSERT_EQ(shaped->device.gemm_efficiency[1].size(), 3u);
  EXPECT_NEAR(shaped->device.gemm_efficiency[1][0].efficiency, 780.0 / 800, 1e-12);
  EXPECT_NEAR(shaped->device.gemm_efficiency[1][1].efficiency, 520.0 / 800, 1e-12);
  EXPECT_NEAR(shaped->device.gemm_efficiency_at(1, 16384, 2304, 768), 520.0 / 800, 1e-9);
  // The tf32 row (a precision crucible does not train in) is neither f32's
  // peak nor in its table.
  EXPECT_DOUBLE_EQ(shaped->device.peak_flops[0], 50e12);
  ASSERT_EQ(shaped->device.gemm_efficiency[0].size(), 2u);
  EXPECT_NEAR(shaped->device.gemm_efficiency[0][1].efficiency, 45.0 / 50, 1e-12);
  probe["gpu"]["devices"][0].erase("gemm");
  // `crucible probe --sections gpu` alone suffices for a GPU node.
  nlohmann::json gpu_only = probe;
  gpu_only.erase("compute"), gpu_only.erase("memory"), gpu_only.erase("cpu"),
      gpu_only.erase("topology");
  auto alone = cluster_from_probe(gpu_only, "probe.json");
  ASSERT_TRUE(alone) << alone.status().message();
  EXPECT_DOUBLE_EQ(alone->device.peak_flops[1], 780e12);
  // A gpu section without its ceilings is named.
  probe["gpu"]["devices"][0].erase("copy_gbs");
  auto bad = cluster_from_probe(probe, "probe.json");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.status().message().find("lacks its GEMM ceilings"), std::string::npos)
      << bad.status().message();
}

}  // namespace
}  // namespace crucible::plan
