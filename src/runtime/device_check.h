// Whether this run's device (run.device) can run its step, decided before
// anything is written (DESIGN.md "Devices"; docs/gpu.md). One line naming
// the problem otherwise:
//   "[train] run.device = cuda:0: no GPU cuda:0 (this machine has 0 GPUs)"
//   "[train] run.device = cuda:0: this crucible was built without CUDA ..."
//   "[train] run.device = cuda:0 (NVIDIA H200): dist.reproducible's tree
//    reduction runs on the host; leave it false on a GPU"
//   "[train] run.device = cuda:0 (...): the CUDA backend lacks ..."
#pragma once
#include <optional>

#include "core/device.h"
#include "core/status.h"
#include "runtime/config.h"

namespace crucible::runtime {

// `placed`: this rank's device where the ranks were placed on GPUs
// (runtime/gpu_world.h); else the one run.device names.
Status check_device(const Config& cfg, std::optional<Device> placed = std::nullopt);

}  // namespace crucible::runtime
