// CUDA graphs (kernels/step_graph.h): a step captured once and replayed is
// the step launched kernel by kernel, bit for bit. Two TrainSteps from one
// config (the same initial weights) take the same batches, one launching
// every step, the other capturing its second and replaying from its third;
// every step's loss and norm and the final weights must be identical, the
// replayed steps count the same kernel calls and FLOPs, and a replay waits
// for the GPU once. fp32, and bf16 with the fused head and full recompute.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "comm/comm.h"
#include "core/kernel_stats.h"
#include "core/rng.h"
#include "gpu/gpu_support.h"
#include "kernels/device_scope.h"
#include "runtime/config.h"
#include "runtime/train_step.h"
#include "support/kernel_harness.h"

namespace crucible {
namespace {

std::vector<float> weights(runtime::TrainStep& step) {
  nn::ParamRegistry& p = step.model().params();
  std::vector<float> w(p.numel());
  EXPECT_TRUE(kernels::cuda::copy_to_host(w.data(), p.values(), w.size() * 4, nullptr).is_ok());
  EXPECT_TRUE(kernels::cuda::synchronize(nullptr).is_ok());
  return w;
}

TEST(GpuGraph, ReplayedStepsAreLaunchedStepsBitForBit) {
  REQUIRE_GPU();
  const std::vector<std::vector<std::string>> variants = {
      {"train.precision=fp32"},
      {"train.precision=bf16", "train.fused_head=true", "train.recompute=full"}};
  for (const auto& variant : variants) {
    SCOPED_TRACE(variant[0]);
    const int B = 2, T = 64;
    std::vector<std::string> sets = {"train.batch_size=2", "model.seq_len=64", "train.grad_accum=2",
                                     "run.device=cuda"};
    sets.insert(sets.end(), variant.begin(), variant.end());
    auto cfg = runtime::load_config("", sets);
    ASSERT_TRUE(cfg) << cfg.status().message();
    auto world = comm::make_single_comm();
    auto launched = runtime::TrainStep::create(*cfg, *world);
    auto graphed = runtime::TrainStep::create(*cfg, *world);
    ASSERT_TRUE(launched && graphed);
    ASSERT_TRUE((*graphed)->graphs_apply());
    kernels::DeviceScope on(Device::cuda(0));
    const int vocab = cfg->model.vocab_size;
    const uint64_t seed = testing::test_seed();
    for (int s = 0; s < 5; ++s) {
      runtime::StepMetrics m[2];
      KernelStatsTable counted[2];
      for (int k = 0; k < 2; ++k) {
        runtime::TrainStep& step = k == 0 ? **launched : **graphed;
        step.allow_graph(k == 1 && s > 0);
        Rng rng(seed, uint64_t(s));  // the same batches for both
        auto load = [&](int, int32_t* tokens, int32_t* targets) {
          for (int i = 0; i < B * T; ++i) {
            tokens[i] = int32_t(rng.next_u32() % uint32_t(vocab));
            targets[i] = int32_t(rng.next_u32() % uint32_t(vocab));
          }
          return 0.0;
        };
        reset_kernel_stats();
        const uint64_t waits = kernels::host_waits();
        ASSERT_TRUE(
            step.run(
                    1e-3f, load, [](const parallel::Action&) {}, [](runtime::Phase) {}, m[k])
                .is_ok());
        EXPECT_EQ(kernels::host_waits() - waits, 1u) << "step " << s;
        counted[k] = kernel_stats();
      }
      EXPECT_EQ((*graphed)->graph_refusal(), "");
      EXPECT_EQ(m[1].graph_ms > 0, s >= 1)
          << "step " << s << ": captured at the second step and launched as the graph, replayed after";
      EXPECT_EQ(m[0].graph_ms, 0.0);
      EXPECT_EQ(m[0].loss, m[1].loss) << "step " << s;
      EXPECT_EQ(m[0].grad_norm, m[1].grad_norm) << "step " << s;
      for (int c = 0; c < int(KernelClass::count); ++c) {
        EXPECT_EQ(counted[0][size_t(c)].calls, counted[1][size_t(c)].calls)
            << kernel_class_name(KernelClass(c));
        EXPECT_DOUBLE_EQ(counted[0][size_t(c)].flops, counted[1][size_t(c)].flops)
            << kernel_class_name(KernelClass(c));
      }
    }
    const std::vector<float> a = weights(**launched), b = weights(**graphed);
    ASSERT_EQ(a.size(), b.size());
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4))
        << "the weights differ after 5 steps";
    EXPECT_EQ((*launched)->optimizer().steps_taken(), 5);
    EXPECT_EQ((*graphed)->optimizer().steps_taken(), 5);
  }
}

}  // namespace
}  // namespace crucible
