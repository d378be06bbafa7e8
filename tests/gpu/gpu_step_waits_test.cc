// The step's one read-back, on the GPU (tests/support/step_waits.h): three
// steps of three micro-batches each, fp32 and bf16, the host waiting for the
// stream once a step, with the tokens copied from pinned memory; and the
// step's parts timed on the GPU.
#include <gtest/gtest.h>

#include "gpu/gpu_support.h"
#include "support/step_waits.h"

namespace crucible {
namespace {

TEST(GpuStep, WaitsForTheGpuOnceAStep) {
  REQUIRE_GPU();
  testing::expect_one_wait_per_step("cuda");
}

// A compute-bound step (6 blocks of width 768, 2 x 8 x 512 tokens: ~2 TFLOP,
// launched in about a millisecond, run in several): its parts are the GPU's
// time, not the host's launches.
TEST(GpuStep, ItsPartsAreTheDevicesTime) {
  REQUIRE_GPU();
  for (const char* precision : {"fp32", "bf16"}) {
    SCOPED_TRACE(precision);
    testing::expect_parts_cover_the_step("cuda",
                                         {"model.n_layer=6", "model.n_embd=768", "model.n_head=12",
                                          "model.seq_len=512", "train.batch_size=8", "train.grad_accum=2",
                                          std::string("train.precision=") + precision},
                                         0.85);
  }
}

}  // namespace
}  // namespace crucible
