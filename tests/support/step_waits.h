// A training step on one rank waits for its device once: the read-back of
// its scalars at its end (kernels/step_scalars.h). Nothing in the forward,
// the loss, the gradient norm or AdamW makes the host wait (on a GPU such a
// wait drains the stream and the launch queue runs dry), and the one
// read-back gives the step's loss and norm. Checked on the CPU
// (tests/runtime/train_step_test.cc) and on a GPU (tests/gpu), with gtest
// expectations; `device` is run.device ("cpu", "cuda"). On a GPU the
// third step is replayed from a CUDA graph (kernels/step_graph.h).
#pragma once
#include <string>

namespace crucible::testing {

void expect_one_wait_per_step(const std::string& device);

}  // namespace crucible::testing
