// The step's one read-back, on the GPU (tests/support/step_waits.h): three
// steps of three micro-batches each, fp32 and bf16, the host waiting for the
// stream once a step, with the tokens copied from pinned memory.
#include <gtest/gtest.h>

#include "gpu/gpu_support.h"
#include "support/step_waits.h"

namespace crucible {
namespace {

TEST(GpuStep, WaitsForTheGpuOnceAStep) {
  REQUIRE_GPU();
  testing::expect_one_wait_per_step("cuda");
}

}  // namespace
}  // namespace crucible
