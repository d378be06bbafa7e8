#include "support/step_waits.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

#include "comm/comm.h"
#include "core/rng.h"
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
      EXPECT_EQ(m.graph_ms > 0, s == 2 && step.graphs_apply()) << "step " << s;
    }
    EXPECT_EQ(step.graph_refusal(), "");
    EXPECT_EQ(step.optimizer().steps_taken(), 3);
  }
}

}  // namespace crucible::testing
