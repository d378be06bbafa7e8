// The step's scalars, in the memory of the device the step runs on.
//
// A step reads nothing back to the host while it runs: the host writes this
// step's learning rate and AdamW step count once at its start, kernels fill
// the loss, the gradient norm and the clip factor as the step goes
// (add_mean, add_sum_squares, adamw_scalars), and the host reads the struct
// back once at the step's end (runtime/train_step.cc). On a GPU that keeps
// the launch queue ahead of the device through the whole step, and it is what
// a captured CUDA graph needs: the graph reads these scalars by address, so
// one graph serves every step (docs/gpu.md). A plain struct: the CPU kernels,
// the CUDA kernels and the host share its layout.
#pragma once
#include <cstdint>

namespace crucible::kernels {

struct StepScalars {
  // Filled by kernels during the step, read back at its end.
  double loss_sum = 0;  // the micro-batches' mean losses, summed (add_mean)
  double grad_sq = 0;   // the squared gradient norm (add_sum_squares; the ranks' total)
  double bc1 = 1;       // AdamW's bias corrections 1 - beta1^t, 1 - beta2^t (adamw_scalars)
  double bc2 = 1;
  float clip = 1;  // the clip factor applied to the gradients (adamw_scalars; 1: none)
  // Written by the host at the step's start.
  float lr = 0;   // this step's learning rate
  int32_t t = 0;  // AdamW's step count, from 1
  int32_t pad = 0;
};
static_assert(sizeof(StepScalars) == 48, "StepScalars: one layout for host, CPU and CUDA kernels");

}  // namespace crucible::kernels
