// The step's one read-back, on the CPU (tests/support/step_waits.h; the GPU's
// is in tests/gpu/gpu_step_waits_test.cc).
#include <gtest/gtest.h>

#include "support/step_waits.h"

namespace crucible {
namespace {

TEST(TrainStep, WaitsForItsDeviceOnceAStep) { testing::expect_one_wait_per_step("cpu"); }

}  // namespace
}  // namespace crucible
