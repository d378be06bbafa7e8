// The time model against published large-cluster training results
// (docs/plan.md, "Against published results"): the shipped DGX files, with
// the stack each published code ran ([stack]: what its collectives carry and
// overlap), must predict the published step times, and rank layouts as the
// measurements did. The published figures are data here, with their sources;
// the predictions are computed.
//
//   [MLM21] Narayanan et al., "Efficient Large-Scale Language Model Training on
//           GPU Clusters Using Megatron-LM", SC'21, Table 1 (A100 80 GB DGX,
//           fp16, full recomputation, s = 2048, V = 51200, no sequence
//           parallelism or distributed optimizer) and Figure 13 (GPT on 64
//           GPUs: tensor parallelism inside a node beats deeper pipelines).
//           Their TFLOP/s count recomputation: F = 96 B s l h^2 (1 + s/6h +
//           V/16lh) per step.
//   [L3]    Llama Team, "The Llama 3 Herd of Models", 2024, Table 4: 405B on
//           H100 (bf16): 8,192 GPUs at TP8 PP16 DP64, 430 TFLOP/s per GPU;
//           16,384 GPUs at TP8 PP16 DP128, 400; s = 8192, 16M tokens a step.
//           Modelled as the GPT of its size (126 layers, C = 16384, 128
//           heads: 406B parameters against Llama's 405B; FLOPs per token 6N
//           + 12 L C T).
#include <gtest/gtest.h>

#include <cstdio>
#include <initializer_list>

#include "plan/cluster.h"
#include "plan/time_model.h"

namespace crucible::plan {
namespace {

Cluster shipped(const std::string& name, Stack stack) {
  auto c = load_cluster(std::string(CRUCIBLE_SOURCE_DIR) + "/configs/clusters/" + name + ".toml");
  EXPECT_TRUE(c) << c.status().message();
  c->nodes = 4096;  // enough devices for every published run
  c->stack = stack;
  return *c;
}

nn::GPTConfig gpt(int layers, int heads, int width, int vocab, int seq) {
  nn::GPTConfig m;
  m.n_layer = layers, m.n_head = heads, m.n_embd = width, m.vocab_size = vocab, m.seq_len = seq;
  return m;
}

// The fastest of the schedules a published run could have used, its other
// fields fixed: the published codes chose their best, so does this.
double best_step(const nn::GPTConfig& md, const Cluster& cl, Candidate c,
                 std::initializer_list<int> vs) {
  double best = 1e30;
  for (int v : vs) {
    c.v = v;
    c.schedule = v > 1 ? "interleaved" : "1f1b";
    const Prediction p = predict(md, c, cl);
    EXPECT_TRUE(p.divides) << c.describe() << ": " << p.why_not;
    if (p.divides) best = std::min(best, p.step_time_s);
  }
  return best;
}

TEST(PublishedResults, MegatronLm2021WeakScalingOnA100) {
  // Megatron-LM 2021: fp16 tensor-parallel all-reduces, none overlapped.
  const Cluster cl = shipped("dgx-a100", Stack{.tp_comm_working = true});
  struct Row {
    double billions;
    int heads, hidden, layers, tp, pp, gpus, batch;
    double tflops;  // per GPU, as published
    double within;  // the error this model is held to (docs/plan.md)
  };
  const Row rows[] = {{1.7, 24, 2304, 24, 1, 1, 32, 512, 137, 0},
                      {3.6, 32, 3072, 30, 2, 1, 64, 512, 138, 0},
                      {7.5, 32, 4096, 36, 4, 1, 128, 512, 142, 0},
                      {18.4, 48, 6144, 40, 8, 1, 256, 1024, 135, 0.12},
                      {39.1, 64, 8192, 48, 8, 2, 512, 1536, 138, 0.12},
                      {76.1, 80, 10240, 60, 8, 4, 1024, 1792, 140, 0.12},
                      {145.6, 96, 12288, 80, 8, 8, 1536, 2304, 148, 0.12}};
  for (const Row& r : rows) {
    const double s = 2048, V = 51200, h = r.hidden, l = r.layers;
    const double F = 96 * r.batch * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
    const double published = F / (r.tflops * 1e12 * r.gpus);
    Candidate c;
    c.tp = r.tp, c.pp = r.pp, c.dp = r.gpus / (r.tp * r.pp);
    c.precision = "bf16", c.recompute = "full";
    double best = 1e30;
    for (int mb : {1, 2, 4, 8}) {  // the paper does not give its micro-batch sizes
      if (r.batch % (c.dp * mb) != 0) continue;
      c.mb = mb, c.m = r.batch / (c.dp * mb);
      best = std::min(best, best_step(gpt(r.layers, r.heads, r.hidden, 51200, 2048), cl, c, {1}));
    }
    const double err = best / published - 1;
    std::printf(
        "[published] MLM21 %6.1fB tp%d pp%-2d %5d GPUs: published %6.2f s, predicted %6.2f s "
        "(%+.1f%%)\n",
        r.billions, r.tp, r.pp, r.gpus, published, best, err * 100);
    if (r.within > 0) {
      EXPECT_LT(std::fabs(err), r.within) << r.billions << "B";
    }
  }
}

TEST(PublishedResults, TensorParallelInsideANodeBeatsDeeperPipelinesAtSmallBatch) {
  // [MLM21] Figure 13's shape on 64 A100s: with few micro-batches a deep
  // pipeline's bubble costs more than tensor parallelism's all-reduces inside
  // the node, and tensor parallelism across nodes is refused outright.
  const Cluster cl = shipped("dgx-a100", Stack{.tp_comm_working = true});
  const nn::GPTConfig md = gpt(96, 96, 12288, 51200, 2048);  // GPT-3 175B
  auto step = [&](int tp) {
    Candidate c;
    c.tp = tp, c.pp = 64 / tp, c.dp = 1, c.mb = 1, c.m = 32;
    c.precision = "bf16", c.recompute = "full";
    return predict(md, c, cl);
  };
  const double t8 = step(8).step_time_s, t4 = step(4).step_time_s, t2 = step(2).step_time_s;
  std::printf(
      "[published] 175B on 64 A100s, batch 32: tp8 pp8 %.1f s, tp4 pp16 %.1f s, tp2 pp32 %.1f s\n",
      t8, t4, t2);
  EXPECT_LT(t8, t4);
  EXPECT_LT(t4, t2);
  const Prediction across = step(16);
  EXPECT_FALSE(across.divides);
  EXPECT_NE(across.why_not.find("spans nodes"), std::string::npos) << across.why_not;
}

TEST(PublishedResults, Llama3On8kAnd16kH100s) {
  // [L3]: bf16 collectives with tensor-parallel communication overlapped (a
  // 2024 code); crucible's own stack (f32 sums, nothing overlapped) must
  // predict slower, by its tensor-parallel time.
  const Stack fast{.tp_comm_working = true, .tp_overlap = 1};
  const Cluster cl = shipped("dgx-h100", fast), ours = shipped("dgx-h100", Stack{});
  const nn::GPTConfig md = gpt(126, 128, 16384, 128256, 8192);
  const double flops_per_step = md.flops_per_token(8192) * 2048.0 * 8192;
  double mfu[2];
  int i = 0;
  for (auto [gpus, tflops] : {std::pair{8192, 430.0}, std::pair{16384, 400.0}}) {
    // Meta counts FLOPs its own way; the published step is its tokens at
    // its rate, which 6N + 12LCT over the same tokens reproduces within 2%.
    const double published = flops_per_step / (tflops * 1e12 * gpus);
    Candidate c;
    c.tp = 8, c.pp = 16, c.dp = gpus / 128, c.mb = 1, c.m = 2048 / c.dp;
    c.precision = "bf16", c.recompute = "selective", c.sp = true, c.zero = 1, c.split = "cost";
    c.fused_head = true;
    const double t = best_step(md, cl, c, {1, 2, 4});
    const double slow = best_step(md, ours, c, {1, 2, 4});
    std::printf(
        "[published] L3 405B %5d H100s: published %.2f s, predicted %.2f s (%+.1f%%); crucible's "
        "stack %.2f s\n",
        gpus, published, t, (t / published - 1) * 100, slow);
    EXPECT_LT(std::fabs(t / published - 1), 0.10) << gpus;
    EXPECT_GT(slow, t * 1.05) << "tensor-parallel sums in f32, nothing overlapped";
    mfu[i++] = flops_per_step / t / (gpus * cl.device.peak_flops[1]);
  }
  // Fewer micro-batches per pipeline at 16K GPUs: a lower MFU, as measured.
  EXPECT_GT(mfu[0], mfu[1]);
}

}  // namespace
}  // namespace crucible::plan
