// The planner's parts by hand: cluster files (the shipped ones parse, bad
// ones are refused naming the key, a file round-trips), alpha-beta
// collectives and the pipeline's bubble against textbook formulas computed
// here, ZeRO's optimizer bytes, the schedule's contexts in flight, and the
// search's two promises (nothing it returns fails to divide or fit, and its
// best is the minimum of every layout evaluated one by one).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "core/allocator.h"
#include "nn/workloads.h"
#include "plan/calibrate.h"
#include "plan/cluster.h"
#include "plan/plan_fixtures.h"
#include "plan/search.h"
#include "plan/time_model.h"
#include "support/files.h"

namespace crucible::plan {
namespace {

TEST(ClusterFile, ShippedDgxFilesParseWithTheirSpecifications) {
  for (const char* name : {"dgx-a100", "dgx-h100"}) {
    auto c = load_cluster(shipped(name));
    ASSERT_TRUE(c) << c.status().message();
    EXPECT_EQ(c->devices_per_node, 8) << name;
    EXPECT_FALSE(c->shared_node) << name;
    EXPECT_NEAR(c->device.memory_bytes, 80e9, 1e9) << name;
    // bf16 tensor cores: far above fp32; the NVSwitch link far above a NIC.
    EXPECT_GT(c->device.peak_flops[1], 10 * c->device.peak_flops[0]) << name;
    EXPECT_GT(c->intra.kinds[0].bandwidth_Bps, 4 * c->inter.kinds[0].bandwidth_Bps) << name;
    // Large GEMMs reach more of the peak than small ones.
    EXPECT_GT(c->device.gemm_efficiency_at(1, 8192, 8192, 8192), c->device.gemm_efficiency_at(1, 512, 512, 512));
  }
  auto a100 = load_cluster(shipped("dgx-a100"));
  auto h100 = load_cluster(shipped("dgx-h100"));
  ASSERT_TRUE(a100 && h100);
  EXPECT_NEAR(a100->device.peak_flops[1], 312e12, 1e12);
  EXPECT_NEAR(h100->device.peak_flops[1], 989e12, 5e12);
}

TEST(ClusterFile, BadFilesAreRefusedNamingTheKey) {
  struct Case {
    std::string from, to, expect;
  };
  const std::vector<Case> cases = {
      {"nodes = 2", "nodes = 2\nnodez = 3", "nodez: unknown key"},
      {"memory_gb = 16", "memory_gb = \"lots\"", "device.memory_gb: expected a number"},
      {"memory_gb = 16", "memory_gb = -1", "device.memory_gb"},
      {"devices_per_node = 4", "", "devices_per_node: missing"},
      {"[[1024, 1024, 1024, 0.8]]\nbf16", "[[1024, 1024, 1024, 1.5]]\nbf16", "device.gemm_efficiency.fp32"},
      {"[links.inter]\nlatency_us = 10\nbandwidth_gbs = 10", "", "links.inter: missing"},
      {"bandwidth_gbs = 100\n[links.inter]", "bandwidth_gbs = 100\n[links.intra.allgatherr]\nlatency_us = 1\n[links.inter]",
       "links.intra.allgatherr: unknown key"},
      {"name = \"toy\"", "name = \"toy", "toy.toml:2"},
      {"latency_us = 10\nbandwidth_gbs = 10", "latency_us = 10\nbandwidth_gbs = 10\n[stack]\ntp_comm = \"fp8\"", "stack.tp_comm: 'fp8' is not f32 or working"},
      {"latency_us = 10\nbandwidth_gbs = 10", "latency_us = 10\nbandwidth_gbs = 10\n[stack]\ntp_overlap = 1.5", "stack.tp_overlap: 1.5 is out of range"},
      {"latency_us = 10\nbandwidth_gbs = 10", "latency_us = 10\nbandwidth_gbs = 10\n[stack]\ngraphs = true", "stack.graphs: unknown key"},
  };
  for (const Case& c : cases) {
    std::string text = kToyCluster;
    const size_t at = text.find(c.from);
    ASSERT_NE(at, std::string::npos) << c.from;
    text.replace(at, c.from.size(), c.to);
    auto r = parse_cluster(text, "toy.toml");
    ASSERT_FALSE(r) << c.to;
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos) << c.to << ": " << r.status().message();
    EXPECT_EQ(r.status().message().find('\n'), std::string::npos) << "one line: " << r.status().message();
  }
  EXPECT_FALSE(load_cluster("/nonexistent/cluster.toml"));
}

TEST(ClusterFile, WrittenFileReadsBackToTheSameValues) {
  Cluster c = toy();
  c.intra.kinds[int(Collective::kP2p)] = {1e-6, 50e9};
  c.step_overhead_s = 0.0025;
  auto back = parse_cluster(cluster_toml(c, "# test\n"), "written.toml");
  ASSERT_TRUE(back) << back.status().message();
  EXPECT_EQ(back->nodes, 2);
  EXPECT_DOUBLE_EQ(back->device.peak_flops[1], 100e12);
  EXPECT_NEAR(back->intra.kinds[3].bandwidth_Bps, 50e9, 1);
  EXPECT_NEAR(back->intra.kinds[0].bandwidth_Bps, 100e9, 1);
  EXPECT_NEAR(back->step_overhead_s, 0.0025, 1e-9);
  EXPECT_NEAR(back->inter.kinds[0].latency_s, 10e-6, 1e-12);
  EXPECT_FALSE(back->stack.tp_comm_working);  // absent: crucible's own stack
  EXPECT_EQ(back->stack.launch_s, 0.0);
  c.stack = {.tp_comm_working = true, .tp_overlap = 0.75, .launch_s = 4.5e-6, .graphs = true};
  auto stacked = parse_cluster(cluster_toml(c, ""), "written.toml");
  ASSERT_TRUE(stacked) << stacked.status().message();
  EXPECT_TRUE(stacked->stack.tp_comm_working);
  EXPECT_DOUBLE_EQ(stacked->stack.tp_overlap, 0.75);
  EXPECT_NEAR(stacked->stack.launch_s, 4.5e-6, 1e-15);
  EXPECT_TRUE(stacked->stack.graphs);
}

TEST(ClusterFile, FromAProbeDocument) {
  nlohmann::json probe = {
      {"schema", "crucible-probe/1"},
      {"host", "box"},
      {"cpu", {{"model", "CPU X"}, {"hardware_threads", 2}}},
      {"compute",
       {{"peak", {{"measured_fma_gflops_all", 200.0}, {"derived_gflops_all", 210.0}, {"threads_all", 2}}},
        {"bf16_native", true},
        {"gemm",
         {{{"m", 512}, {"n", 512}, {"k", 512}, {"dtype", "f32"}, {"threads", 2}, {"gflops", 105.0}, {"valid", true}},
          {{"m", 512}, {"n", 512}, {"k", 512}, {"dtype", "f32"}, {"threads", 1}, {"gflops", 60.0}, {"valid", true}},
          {{"m", 512}, {"n", 512}, {"k", 512}, {"dtype", "bf16"}, {"threads", 2}, {"gflops", 210.0}, {"valid", true}},
          {{"m", 64}, {"n", 64}, {"k", 64}, {"dtype", "bf16"}, {"threads", 2}, {"gflops", 999.0}, {"valid", false}}}}}},
      {"memory", {{"threads_all", {{"triad", {{"best_gbs", 30.0}}}}}}},
      {"topology", {{"numa_nodes", {{{"memory_bytes", 8e9}}}}}}};
  auto c = cluster_from_probe(probe, "probe.json");
  ASSERT_TRUE(c) << c.status().message();
  EXPECT_TRUE(c->shared_node);
  EXPECT_EQ(c->devices_per_node, 2);
  EXPECT_DOUBLE_EQ(c->device.peak_flops[0], 210e9);  // the derived peak: the FMA loop agrees with it
  EXPECT_DOUBLE_EQ(c->device.peak_flops[1], 420e9);
  ASSERT_EQ(c->device.gemm_efficiency[0].size(), 1u);  // the all-thread row only
  EXPECT_NEAR(c->device.gemm_efficiency[0][0].efficiency, 105.0 / 210, 1e-12);
  ASSERT_EQ(c->device.gemm_efficiency[1].size(), 1u);  // the invalid row is not believed
  EXPECT_DOUBLE_EQ(c->device.memory_bandwidth_Bps, 30e9);
  EXPECT_DOUBLE_EQ(c->device.memory_bytes, 8e9);
  // Attention without a measurement: a fraction of the GEMMs' efficiency;
  // with the run's own rows, the last valid one of each precision.
  EXPECT_NEAR(c->device.attention_efficiency[0], 0.5 * 105.0 / 210, 1e-12);
  probe["compute"]["attention"] = {
      {{"B", 8}, {"T", 256}, {"C", 256}, {"NH", 4}, {"dtype", "f32"}, {"threads", 2}, {"gflops", 21.0}, {"valid", true}},
      {{"B", 8}, {"T", 512}, {"C", 256}, {"NH", 4}, {"dtype", "f32"}, {"threads", 2}, {"gflops", 42.0}, {"valid", true}},
      {{"B", 8}, {"T", 512}, {"C", 256}, {"NH", 4}, {"dtype", "f32"}, {"threads", 1}, {"gflops", 30.0}, {"valid", true}},
      {{"B", 8}, {"T", 256}, {"C", 256}, {"NH", 4}, {"dtype", "bf16"}, {"threads", 2}, {"gflops", 63.0}, {"valid", true}},
      {{"B", 8}, {"T", 256}, {"C", 256}, {"NH", 4}, {"dtype", "bf16"}, {"threads", 2}, {"gflops", 99.0}, {"valid", false}}};
  c = cluster_from_probe(probe, "probe.json");
  ASSERT_TRUE(c) << c.status().message();
  EXPECT_NEAR(c->device.attention_efficiency[0], 42.0 / 210, 1e-12);
  EXPECT_NEAR(c->device.attention_efficiency[1], 63.0 / 420, 1e-12);
  probe["compute"].erase("attention");
  // A derived clock far from the FMA loop's: the loop's figure is the peak.
  probe["compute"]["peak"]["derived_gflops_all"] = 1000.0;
  EXPECT_DOUBLE_EQ(cluster_from_probe(probe, "probe.json")->device.peak_flops[0], 200e9);
  // A peak below a measured GEMM is no peak: 1.25x the best GEMM instead.
  probe["compute"]["peak"]["measured_fma_gflops_all"] = 50.0;
  probe["compute"]["peak"]["derived_gflops_all"] = 60.0;
  EXPECT_DOUBLE_EQ(cluster_from_probe(probe, "probe.json")->device.peak_flops[0], 1.25 * 105e9);
  EXPECT_FALSE(cluster_from_probe(nlohmann::json{{"schema", "other"}}, "x.json"));
  // The node's power under the throttle section's load (RAPL), where measured.
  EXPECT_EQ(c->device.power_w, 0);
  probe["throttle"] = {{"power_w", 87.5}, {"power_source", "RAPL package-0"}};
  EXPECT_DOUBLE_EQ(cluster_from_probe(probe, "probe.json")->device.power_w, 87.5);
  // A CPU without a bf16 matmul widens bf16 GEMMs: their buffer is in the plan's memory.
  EXPECT_FALSE(c->device.bf16_widened);
  probe["compute"]["bf16_native"] = false;
  EXPECT_TRUE(cluster_from_probe(probe, "probe.json")->device.bf16_widened);
}

// Energy per token: every device in use at its power under load over the
// whole predicted step; a shared node (CPUs) draws its power once for all of
// its ranks. No power in the cluster file: no energy prediction.
TEST(PlanPredict, EnergyPerTokenIsPowerOverTheStepPerToken) {
  const nn::GPTConfig m = workload("gpt2-124M");
  auto h100 = load_cluster(shipped("dgx-h100"));
  ASSERT_TRUE(h100) << h100.status().message();
  EXPECT_DOUBLE_EQ(h100->device.power_w, 700);
  Candidate c;
  c.dp = 8, c.mb = 4, c.precision = "bf16";
  const Prediction p = predict(m, c, *h100);
  ASSERT_TRUE(p.runs) << p.why_not;
  const double tokens = double(c.global_batch()) * m.seq_len;
  EXPECT_NEAR(p.energy_j_per_token, 700.0 * 8 * p.step_time_s / tokens, 1e-12);
  EXPECT_NEAR(to_json(p)["energy_j_per_token"].get<double>(), p.energy_j_per_token, 1e-15);
  Cluster cpu = toy();
  cpu.shared_node = true, cpu.devices_per_node = 2, cpu.device.power_w = 90;
  Candidate two;
  two.dp = 2, two.mb = 4;
  const Prediction q = predict(m, two, cpu);
  ASSERT_TRUE(q.runs) << q.why_not;
  EXPECT_NEAR(q.energy_j_per_token, 90.0 * q.step_time_s / (double(two.global_batch()) * m.seq_len),
              1e-12);
  cpu.device.power_w = 0;
  const Prediction none = predict(m, two, cpu);
  EXPECT_EQ(none.energy_j_per_token, 0);
  EXPECT_FALSE(to_json(none).contains("energy_j_per_token"));
}

TEST(PlanTextbook, RingCollectivesFromAlphaBeta) {
  const Cluster c = toy();
  // 1 GB allreduce over 8: 2(n-1) latency hops + 2(n-1)/n x bytes / busbw.
  EXPECT_NEAR(c.intra.time(Collective::kAllreduce, 1e9, 8), 14 * 2e-6 + 1.75 * 1e9 / 100e9, 1e-12);
  EXPECT_NEAR(c.intra.time(Collective::kAllgather, 1e9, 4), 3 * 2e-6 + 0.75 * 1e9 / 100e9, 1e-12);
  EXPECT_NEAR(c.inter.time(Collective::kP2p, 1e6, 2), 10e-6 + 1e6 / 10e9, 1e-12);
  EXPECT_EQ(c.intra.time(Collective::kAllreduce, 1e9, 1), 0.0);
}

TEST(PlanTextbook, ZeroOneShardsTheMomentsOverDataParallelRanks) {
  const nn::GPTConfig m = workload("tiny");
  const Cluster cl = toy();
  Candidate c;
  c.dp = 4, c.mb = 2, c.m = 1;
  auto layout = check(m, c);
  ASSERT_TRUE(layout) << layout.status().message();
  const uint64_t P = nn::GPT::flat_params(m);
  const MemoryEstimate replicated = estimate_memory(m, c, *layout, 1);
  c.zero = 1;
  const MemoryEstimate sharded = estimate_memory(m, c, *layout, 1);
  EXPECT_EQ(replicated.optimizer, 2 * Allocator::size_class(P * 4));
  EXPECT_EQ(sharded.optimizer, 2 * Allocator::size_class(((P + 3) / 4 + 16) * 4));
  EXPECT_EQ(sharded.weights, replicated.weights);
  (void)cl;
}

TEST(PlanTextbook, OneFOneBHoldsPpContextsOnTheFirstStageAndFewerAfter) {
  const nn::GPTConfig m = workload("tiny");
  Candidate c;
  c.pp = 4, c.m = 8, c.mb = 1;
  auto layout = check(m, c);
  ASSERT_TRUE(layout) << layout.status().message();
  for (int p = 0; p < 4; ++p) {
    const MemoryEstimate e = estimate_memory(m, c, *layout, layout->rank_of({0, p, 0}));
    // Stage p keeps pp - p micro-batches in flight, + 1 for a gradient
    // send in flight after the first stage (which sends none).
    EXPECT_EQ(e.contexts, 4 - p + (p > 0 ? 1 : 0)) << "stage " << p;
  }
  EXPECT_EQ(largest_rank(m, c, *layout).rank, 0);
}

TEST(PlanTextbook, PipelineBubbleIsTheScheduleFormula) {
  const nn::GPTConfig m = workload("tiny");
  const Cluster cl = toy();
  for (const auto& [schedule, v, want] :
       std::vector<std::tuple<std::string, int, double>>{{"1f1b", 1, 3.0 / 8}, {"interleaved", 1, 3.0 / 8}, {"zb-h1", 1, 1.0 / 8}}) {
    Candidate c;
    c.pp = 4, c.m = 8, c.mb = 1, c.schedule = schedule, c.v = v;
    const Prediction p = predict(m, c, cl);
    ASSERT_TRUE(p.runs) << p.why_not;
    const Breakdown& b = p.breakdown;
    EXPECT_NEAR(b.bubble / (b.forward + b.backward + b.tp_comm + b.pp_comm), want, 1e-12) << schedule;
  }
}

TEST(PlanTextbook, GemmTimeAtTheTableEfficiency) {
  // One 1024^3 GEMM's worth: with flat tables the efficiency is exact.
  const Cluster cl = toy();
  EXPECT_DOUBLE_EQ(cl.device.gemm_efficiency_at(0, 1024, 1024, 1024), 0.8);
  EXPECT_DOUBLE_EQ(cl.device.gemm_efficiency_at(0, 64, 99999, 3), 0.8);
}

TEST(PlanPredict, ImpossibleLayoutsSayWhy) {
  const nn::GPTConfig m = workload("gpt2-124M");
  const Cluster cl = toy();
  Candidate c;
  c.tp = 5;
  c.dp = 1;
  Prediction p = predict(m, c, cl);
  EXPECT_FALSE(p.runs);
  EXPECT_NE(p.why_not.find("tp = 5 spans nodes"), std::string::npos) << p.why_not;
  c.tp = 1, c.pp = 5;
  p = predict(m, c, cl);
  EXPECT_FALSE(p.runs);
  EXPECT_NE(p.why_not.find("n_layer"), std::string::npos) << p.why_not;
  c.pp = 1, c.mb = 4096;  // activations of 4096 x 64 tokens: far beyond 16 GB
  p = predict(m, c, cl);
  EXPECT_FALSE(p.runs);
  EXPECT_NE(p.why_not.find("does not fit"), std::string::npos) << p.why_not;
  c.mb = 1, c.dp = 16;
  p = predict(m, c, cl);
  EXPECT_NE(p.why_not.find("the cluster has 8"), std::string::npos) << p.why_not;
}

TEST(PlanPredict, RecomputationTradesTimeForMemory) {
  const nn::GPTConfig m = workload("gpt2-124M");
  const Cluster cl = toy();
  Candidate c;
  c.mb = 8;
  double last_time = 0;
  uint64_t last_mem = UINT64_MAX;
  for (const char* rc : {"none", "selective", "full"}) {
    c.recompute = rc;
    const Prediction p = predict(m, c, cl);
    ASSERT_TRUE(p.runs) << p.why_not;
    EXPECT_GT(p.step_time_s, last_time) << rc;
    EXPECT_LT(p.memory.activations, last_mem) << rc;
    last_time = p.step_time_s, last_mem = p.memory.activations;
  }
}

// train.fused_head as --layout's fused_head: the (B,T,V) logits leave the
// estimate. The head's input gradient (B,T,C) moves from backward into
// forward, and one chunk's logits (at most 32 MiB) live while forward makes
// them, where backward's own peak comes later: so the estimate drops by the
// logits less at most one chunk's (before the allocator's size classes,
// which the prediction rounds each context to).
TEST(PlanPredict, FusedHeadTakesTheLogitsOutOfTheActivations) {
  const nn::GPTConfig m = workload("gpt2-124M");
  const Cluster cl = toy();
  auto parsed = parse_layout("mb=16,recompute=full,fused_head=true");
  ASSERT_TRUE(parsed) << parsed.status().message();
  EXPECT_TRUE(parsed->c.fused_head);
  EXPECT_NE(parsed->c.describe().find(",fused_head=true"), std::string::npos) << parsed->c.describe();
  EXPECT_FALSE(parse_layout("fused_head=maybe"));
  Candidate off = parsed->c;
  off.fused_head = false;
  const Prediction fused = predict(m, parsed->c, cl), whole = predict(m, off, cl);
  ASSERT_TRUE(fused.runs && whole.runs) << fused.why_not << whole.why_not;
  const uint64_t logits = uint64_t(16) * m.seq_len * m.vocab_size * 4;
  const uint64_t chunk = uint64_t(nn::fused_head_rows(m, nn::GPTPart::whole(m))) * m.vocab_size * 4;
  EXPECT_LT(fused.memory.activations, whole.memory.activations);
  nn::GPTPart part = part_of(m, *check(m, off), {}, off);
  const uint64_t before = nn::GPT::activation_bytes(m, part, 0, 16, m.seq_len, false);
  part.head_chunk = nn::fused_head_rows(m, part);
  const uint64_t after = nn::GPT::activation_bytes(m, part, 0, 16, m.seq_len, false);
  ASSERT_LT(after, before);
  const uint64_t saved = before - after;
  EXPECT_LE(saved, logits);
  EXPECT_GE(saved, logits - chunk);
}

// Every runnable layout of gpt2-124M on the toy cluster's 8 devices at a
// global batch of 32, one by one (every recompute, either head, no early
// stop, every schedule with every v).
std::vector<Prediction> every_runnable(const nn::GPTConfig& m, const Cluster& cl) {
  std::vector<Prediction> out;
  for (int tp : {1, 2, 4})
    for (int pp : {1, 2, 4})
      for (int mb : {1, 2, 4, 8, 16, 32})
        for (int zero : {0, 1, 2})
          for (const char* rc : {"none", "selective", "full"})
            for (const char* prec : {"fp32", "bf16"})
              for (bool sp : {false, true})
                for (const char* sched : {"1f1b", "interleaved", "zb-h1"})
                  for (int v : {1, 2, 4})
                    for (bool fused : {false, true}) {
                      if (tp * pp > 8) continue;
                      Candidate c;
                      c.tp = tp, c.pp = pp, c.dp = 8 / (tp * pp), c.mb = mb, c.zero = zero,
                      c.recompute = rc;
                      c.precision = prec, c.sp = sp, c.schedule = sched, c.v = v,
                      c.fused_head = fused;
                      if (32 % (c.dp * mb)) continue;
                      c.m = 32 / (c.dp * mb);
                      const Prediction p = predict(m, c, cl);
                      if (p.runs) out.push_back(p);
                    }
  return out;
}

TEST(PlanSearch, ReturnsOnlyRunnableLayoutsAndTheMinimumOfAllEvaluated) {
  const nn::GPTConfig m = workload("gpt2-124M");
  Cluster cl = toy();
  cl.device.memory_bytes = 2.2e9;  // tight: some layouts do not fit
  SearchOptions o;
  o.devices = 8, o.global_batch = 32, o.top = 1000;
  auto r = search(m, cl, o);
  ASSERT_TRUE(r) << r.status().message();
  ASSERT_FALSE(r->best.empty());
  EXPECT_GT(r->rejected["does not fit"], 0) << "the tight memory rejected nothing: the test proves nothing";
  for (size_t i = 0; i < r->best.size(); ++i) {
    const Prediction& p = r->best[i];
    EXPECT_TRUE(p.runs);
    EXPECT_EQ(p.layout.world(), 8);
    EXPECT_EQ(p.layout.global_batch(), 32);
    EXPECT_TRUE(check(m, p.layout)) << p.layout.describe();
    EXPECT_LE(p.memory.allocator_bytes(), p.device_memory_bytes) << p.layout.describe();
    if (i) {
      EXPECT_LE(r->best[i - 1].step_time_s, p.step_time_s);
    }
  }
  // Brute force over the same space (every recompute, either head, no early
  // stop): no runnable layout is faster than the search's best.
  double brute = 1e300;
  const std::vector<Prediction> all = every_runnable(m, cl);
  for (const Prediction& p : all) brute = std::min(brute, p.step_time_s);
  const int64_t runnable = int64_t(all.size());
  EXPECT_GT(runnable, 100);
  EXPECT_DOUBLE_EQ(r->best.front().step_time_s, brute);
}

// A layout without its memory savings (what the search weighs once,
// choosing the cheapest saving that fits).
std::string point_of(const Candidate& c) {
  Candidate k = c;
  k.recompute = "none", k.fused_head = false;
  return k.describe();
}

// plan --layout with fields left out is the search kept to the given fields:
// for each set of given fields, what it returns matches them, and it is
// exactly what brute force over every layout filtered by them finds: the
// same points (each at its fastest memory saving that fits), the same best.
TEST(PlanSearch, AConstrainedSearchIsTheBruteForceFilteredByTheGivenFields) {
  const nn::GPTConfig m = workload("gpt2-124M");
  Cluster cl = toy();
  cl.device.memory_bytes = 2.2e9;  // tight: the memory savings matter
  const std::vector<Prediction> all = every_runnable(m, cl);
  ASSERT_GT(all.size(), 100u);
  std::vector<std::pair<const char*, LayoutConstraints>> cases;
  auto add = [&](const char* text) {
    auto parsed = parse_layout(text);
    ASSERT_TRUE(parsed) << text << ": " << parsed.status().message();
    cases.push_back({text, LayoutConstraints::from(*parsed)});
  };
  for (const char* text :
       {"tp=2", "pp=2,mb=2", "zero=1,precision=bf16", "recompute=full", "fused_head=true",
        "schedule=interleaved", "dp=2", "m=4", "sp=true", "v=2", "tp=2,pp=2,schedule=zb-h1",
        "schedule=zb-h1,pp=1", "mb=1,recompute=selective,fused_head=false"})
    add(text);
  for (const auto& [text, fixed] : cases) {
    SCOPED_TRACE(text);
    SearchOptions o;
    o.devices = 8, o.global_batch = 32, o.top = 100000, o.fixed = fixed;
    auto r = search(m, cl, o);
    ASSERT_TRUE(r) << r.status().message();
    ASSERT_FALSE(r->best.empty());
    // Brute force, filtered: the fastest of each point (the search's space:
    // v > 1 with the interleaved schedule only, pipelines' schedules only
    // with pp > 1 and ZeRO only with dp > 1 unless given, sp with tp > 1).
    std::map<std::string, double> fastest;
    for (const Prediction& p : all) {
      const Candidate& c = p.layout;
      if (!fixed.matches(c)) continue;
      if ((c.v > 1) != (c.schedule == "interleaved") && !fixed.v) continue;
      if (c.pp == 1 && c.schedule != "1f1b" && !fixed.schedule) continue;
      if (c.v > 1 && c.schedule != "interleaved") continue;
      if (c.sp && c.tp == 1) continue;  // nothing to split: sp is tp > 1's
      if (c.zero > 0 && c.dp == 1 && !fixed.zero)
        continue;  // nothing to shard: the same as zero = 0
      auto [it, fresh] = fastest.emplace(point_of(c), p.step_time_s);
      if (!fresh) it->second = std::min(it->second, p.step_time_s);
    }
    ASSERT_FALSE(fastest.empty());
    std::map<std::string, double> found;
    for (const Prediction& p : r->best) {
      EXPECT_TRUE(p.runs);
      EXPECT_TRUE(fixed.matches(p.layout)) << p.layout.describe();
      EXPECT_EQ(p.layout.world(), 8);
      EXPECT_EQ(p.layout.global_batch(), 32);
      EXPECT_TRUE(found.emplace(point_of(p.layout), p.step_time_s).second)
          << "weighed twice: " << p.layout.describe();
    }
    EXPECT_EQ(found.size(), fastest.size());
    for (const auto& [point, t] : fastest) {
      auto it = found.find(point);
      if (it == found.end()) {
        ADD_FAILURE() << "brute force runs " << point << ", the search does not";
        continue;
      }
      EXPECT_DOUBLE_EQ(it->second, t) << point;
    }
    double best = 1e300;
    for (const auto& [point, t] : fastest) best = std::min(best, t);
    EXPECT_DOUBLE_EQ(r->best.front().step_time_s, best);
  }
  // Given fields that rule everything out are counted with their reason.
  SearchOptions o;
  o.devices = 8, o.global_batch = 32;
  o.fixed.tp = 3;
  auto none = search(m, cl, o);
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->best.empty());
  EXPECT_EQ(none->rejected.count("tp does not divide the devices"), 1u);
}

// The planner asks the flat parameter count of every layout it weighs: it
// is computed from one block, and equals registering every tensor.
TEST(PlanModel, FlatParamsFromOneBlockEqualsRegisteringEveryTensor) {
  const nn::GPTConfig m{12, 4, 64, 1000, 32};
  std::vector<nn::GPTPart> parts = {nn::GPTPart::whole(m)};
  nn::GPTPart first{{{0, 5}}, true, false}, middle{{{5, 7}, {9, 10}}, false, false},
      last{{{10, 12}}, false, true};
  for (nn::GPTPart p : {first, middle, last}) {
    parts.push_back(p);
    for (int r : {0, 1, 3}) {
      p.tp = 4, p.tp_rank = r;
      parts.push_back(p);
    }
  }
  for (const nn::GPTPart& p : parts) {
    size_t registered = 0;
    for (const nn::ParamSpec& s : nn::GPT::param_specs(m, p)) registered = s.offset + s.numel;
    EXPECT_EQ(nn::GPT::flat_params(m, p), (registered + 15) / 16 * 16)
        << "tp " << p.tp << " rank " << p.tp_rank << ", " << p.chunks.size() << " chunks";
  }
}

// Linear in the layers, not quadratic: a 12,000-layer model (190 s before)
// plans on 768 devices in seconds. The bound is a guard.
TEST(PlanSearch, TwelveThousandLayersPlanInSeconds) {
  auto cl = load_cluster(shipped("dgx-h100"));
  ASSERT_TRUE(cl) << cl.status().message();
  nn::GPTConfig deep;
  deep.n_layer = 12000, deep.n_head = 16, deep.n_embd = 1024, deep.vocab_size = 32000,
  deep.seq_len = 1024;
  SearchOptions o;
  o.devices = 768, o.global_batch = 768, o.top = 3;
  const auto start = std::chrono::steady_clock::now();
  auto r = search(deep, *cl, o);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(r) << r.status().message();
  ASSERT_FALSE(r->best.empty());
  EXPECT_GT(r->evaluated, 100);
  EXPECT_LT(seconds, 20) << r->evaluated << " layouts of 12,000 layers took " << seconds << " s";
}

TEST(PlanSearch, ThousandsOfDevicesInSeconds) {
  auto cl = load_cluster(shipped("dgx-h100"));
  ASSERT_TRUE(cl) << cl.status().message();
  nn::GPTConfig big;  // GPT-3 175B's shape
  big.n_layer = 96, big.n_head = 96, big.n_embd = 12288, big.vocab_size = 51200, big.seq_len = 2048;
  SearchOptions o;
  o.devices = 1024, o.global_batch = 1536, o.top = 3, o.precisions = {"bf16"};
  auto r = search(big, *cl, o);
  ASSERT_TRUE(r) << r.status().message();
  ASSERT_FALSE(r->best.empty());
  const Prediction& best = r->best.front();
  // A model this size needs model parallelism on 80 GB devices.
  EXPECT_GT(best.layout.tp * best.layout.pp, 1) << best.layout.describe();
  EXPECT_GT(best.mfu, 0.1);
  EXPECT_LT(best.mfu, 0.8);
}

}  // namespace
}  // namespace crucible::plan
