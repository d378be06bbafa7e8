// A training step on one rank waits for its device once: the read-back of
// its scalars at its end (kernels/step_scalars.h). Nothing in the forward,
// the loss, the gradient norm or AdamW makes the host wait (on a GPU such a
// wait drains the stream and the launch queue runs dry), and the one
// read-back gives the step's loss and norm. Checked on the CPU
// (tests/runtime/train_step_test.cc) and on a GPU (tests/gpu), with gtest
// expectations; `device` is run.device ("cpu", "cuda"). On a GPU the
// second step is captured as a CUDA graph and the third replayed
// (kernels/step_graph.h).
#pragma once
#include <string>
#include <vector>

namespace crucible::testing {

void expect_one_wait_per_step(const std::string& device);

// A step's parts (kernels/step_parts.h: forward, backward, optimizer) are
// the time they took on the device that ran them. Steps launched kernel by
// kernel (graphs off) with the config overrides `sets` on `device`: each
// part is positive, and together they cover the step's wall time within
// [cover, 1]. On a GPU whose step is compute-bound that fails for host
// clocks (they would time the launches, and the step's wait for the device
// would fall outside every part). On a GPU also: a step with kernel timing on
// has its kernels' device time (kernels/kernel_timer.h) inside its parts,
// and a step replayed from a graph has graph_ms and no parts.
void expect_parts_cover_the_step(const std::string& device, const std::vector<std::string>& sets, double cover);

}  // namespace crucible::testing
