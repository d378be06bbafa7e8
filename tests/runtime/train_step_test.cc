// The step's one read-back, on the CPU (tests/support/step_waits.h; the GPU's
// is in tests/gpu/gpu_step_waits_test.cc).
#include <gtest/gtest.h>

#include "support/step_waits.h"

namespace crucible {
namespace {

TEST(TrainStep, WaitsForItsDeviceOnceAStep) { testing::expect_one_wait_per_step("cpu"); }

// The CPU's parts are the host clock around them: together most of a
// compute-bound step (what is left: the batch, the gradient reduction's
// bookkeeping, zeroing the gradients, the read-back).
TEST(TrainStep, ItsPartsCoverTheStep) {
  testing::expect_parts_cover_the_step(
      "cpu", {"train.batch_size=4", "model.seq_len=64", "train.grad_accum=2", "train.precision=fp32"}, 0.8);
}

}  // namespace
}  // namespace crucible
