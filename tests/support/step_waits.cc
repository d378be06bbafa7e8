#include "support/step_waits.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

#include "comm/comm.h"
#include "core/clock.h"
#include "core/rng.h"
#include "kernels/cuda/cuda.h"
#include "kernels/device_scope.h"
#include "runtime/config.h"
#include "runtime/train_step.h"

namespace crucible::testing {

void expect_one_wait_per_step(const std::string& device) {
  for (const char* precision : {"fp32", "bf16"}) {
    SCOPED_TRACE(device + ", " + precision);
    const int B = 2, T = 32;
    auto cfg = runtime::load_config(
        "", {"train.batch_size=2", "model.seq_len=32", "train.grad_accum=3",
             std::string("train.precision=") + precision, "run.device=" + device});
    ASSERT_TRUE(cfg) << cfg.status().message();
    auto world = comm::make_single_comm();
    auto made = runtime::TrainStep::create(*cfg, *world);
    ASSERT_TRUE(made) << made.status().message();
    runtime::TrainStep& step = **made;
    kernels::DeviceScope on(step.model().part().device);
    Rng rng(7, 1);
    const int vocab = cfg->model.vocab_size;
    auto load = [&](int, int32_t* tokens, int32_t* targets) {
      for (int i = 0; i < B * T; ++i) {
        tokens[i] = int32_t(rng.next_u32() % uint32_t(vocab));
        targets[i] = int32_t(rng.next_u32() % uint32_t(vocab));
      }
      return 0.0;
    };
    for (int s = 0; s < 3; ++s) {
      // After the first step a GPU's step is captured as a CUDA graph (step
      // 1) and replayed (step 2): a replay waits once too.
      step.allow_graph(s > 0);
      runtime::StepMetrics m;
      const uint64_t before = kernels::host_waits();
      ASSERT_TRUE(step.run(
                          1e-3f, load, [](const parallel::Action&) {}, [](runtime::Phase) {}, m)
                      .is_ok());
      EXPECT_EQ(kernels::host_waits() - before, 1u)
          << "step " << s << ": the host waited for the device mid-step";
      // What the read-back brought: the mean of three micro-batches' losses on
      // random tokens (near ln(vocab) at the start) and the gradient norm.
      EXPECT_TRUE(std::isfinite(m.loss) && std::isfinite(m.grad_norm));
      EXPECT_GT(m.loss, 0.5 * std::log(double(vocab)));
      EXPECT_LT(m.loss, 2.0 * std::log(double(vocab)));
      EXPECT_GT(m.grad_norm, 0.0);
      // The captured step ran as the graph too: launch to read-back.
      EXPECT_EQ(m.graph_ms > 0, s >= 1 && step.graphs_apply()) << "step " << s;
    }
    EXPECT_EQ(step.graph_refusal(), "");
    EXPECT_EQ(step.optimizer().steps_taken(), 3);
  }
}

void expect_parts_cover_the_step(const std::string& device, const std::vector<std::string>& sets,
                                 double cover) {
  std::vector<std::string> all = sets;
  all.push_back("run.device=" + device);
  auto cfg = runtime::load_config("", all);
  ASSERT_TRUE(cfg) << cfg.status().message();
  auto world = comm::make_single_comm();
  auto made = runtime::TrainStep::create(*cfg, *world);
  ASSERT_TRUE(made) << made.status().message();
  runtime::TrainStep& step = **made;
  const Device dev = step.model().part().device;
  kernels::DeviceScope on(dev);
  Rng rng(11, 1);
  const int vocab = cfg->model.vocab_size;
  const int64_t BT = cfg->train.batch_size * cfg->model.seq_len;
  auto load = [&](int, int32_t* tokens, int32_t* targets) {
    for (int64_t i = 0; i < BT; ++i) {
      tokens[i] = int32_t(rng.next_u32() % uint32_t(vocab));
      targets[i] = int32_t(rng.next_u32() % uint32_t(vocab));
    }
    return 0.0;
  };
  auto run = [&](runtime::StepMetrics& m) {
    const int64_t t0 = now_ns();
    Status ran = step.run(
        1e-4f, load, [](const parallel::Action&) {}, [](runtime::Phase) {}, m);
    EXPECT_TRUE(ran.is_ok()) << ran.message();
    return (now_ns() - t0) * 1e-6;
  };
  {
    runtime::StepMetrics warm;  // the first step allocates what the others reuse
    run(warm);
  }
  for (int s = 0; s < 3; ++s) {
    runtime::StepMetrics m;
    const double wall = run(m);
    const double parts = m.forward_ms + m.backward_ms + m.optimizer_ms;
    EXPECT_GT(m.forward_ms, 0) << "step " << s;
    EXPECT_GT(m.backward_ms, 0) << "step " << s;
    EXPECT_GT(m.optimizer_ms, 0) << "step " << s;
    EXPECT_EQ(m.graph_ms, 0) << "step " << s;
    EXPECT_LE(parts, wall) << "step " << s;
    EXPECT_GE(parts, cover * wall)
        << "step " << s << ": forward " << m.forward_ms << ", backward " << m.backward_ms
        << ", optimizer " << m.optimizer_ms << " ms of " << wall << " ms";
  }
  if (!dev.is_cuda()) return;
  // Kernel timing on: the kernels' device time lies inside the parts (the
  // parts add the gaps between kernels).
  ASSERT_TRUE(kernels::cuda::set_kernel_timing(true).is_ok());
  runtime::StepMetrics timed;
  run(timed);
  auto kt = kernels::cuda::collect_kernel_times(kernels::current_target().stream);
  ASSERT_TRUE(kernels::cuda::set_kernel_timing(false).is_ok());
  ASSERT_TRUE(kt) << kt.status().message();
  const double kernels_ms = double(kt->kernel_ns) * 1e-6,
               parts_ms = timed.forward_ms + timed.backward_ms + timed.optimizer_ms;
  EXPECT_GT(kt->kernels, 10);
  EXPECT_LE(kernels_ms, parts_ms * 1.01 + 0.05) << kt->kernels << " kernels";
  EXPECT_GE(kernels_ms, 0.5 * parts_ms) << kt->kernels << " kernels";
  // Captured (step 0) and replayed from a graph: the whole as graph_ms, and
  // the parts from the graph's own events, covering it as a launched step's
  // cover its wall time.
  step.allow_graph(true);
  for (int s = 0; s < 3; ++s) {
    runtime::StepMetrics m;
    const double wall = run(m);
    const double parts = m.forward_ms + m.backward_ms + m.optimizer_ms;
    EXPECT_GT(m.graph_ms, 0) << "graph step " << s;
    EXPECT_LE(m.graph_ms, wall) << "graph step " << s;
    EXPECT_GT(m.forward_ms, 0) << "graph step " << s;
    EXPECT_GT(m.backward_ms, 0) << "graph step " << s;
    EXPECT_GT(m.optimizer_ms, 0) << "graph step " << s;
    EXPECT_LE(parts, m.graph_ms) << "graph step " << s;
    EXPECT_GE(parts, cover * m.graph_ms)
        << "graph step " << s << ": forward " << m.forward_ms << ", backward " << m.backward_ms
        << ", optimizer " << m.optimizer_ms << " ms of " << m.graph_ms << " ms";
  }
  EXPECT_EQ(step.graph_refusal(), "");
  EXPECT_EQ(step.take_graph_warning(), "") << "the graph should time the step's parts";
}

}  // namespace crucible::testing
