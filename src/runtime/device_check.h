// Whether this run's device (run.device) can run its step, decided before
// anything is written (DESIGN.md "Devices"; docs/gpu.md). One line naming
// the problem otherwise:
//   "[train] run.device = cuda:0: no GPU cuda:0 (this machine has 0 GPUs)"
//   "[train] run.device = cuda:0: this crucible was built without CUDA ..."
//   "[train] run.device = cuda:0 (NVIDIA H200): 2 ranks on GPUs need the GPU
//    collectives, not built yet; train on one rank"
//   "[train] run.device = cuda:0 (...): the CUDA backend lacks ..."
// `world`: the job's ranks.
#pragma once
#include "core/status.h"
#include "runtime/config.h"

namespace crucible::runtime {

Status check_device(const Config& cfg, int world);

}  // namespace crucible::runtime
