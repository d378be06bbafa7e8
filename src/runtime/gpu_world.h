// A run's ranks on GPUs (docs/parallelism.md, "Ranks on GPUs"): which GPU this
// rank uses (runtime/gpu_placement.h) and the Comm its collectives on device
// buffers go through (comm/device_comm.h: NCCL, or staged through pinned
// host memory where ranks share a GPU).
#pragma once
#include <memory>
#include <string>

#include "comm/comm.h"
#include "core/device.h"
#include "core/status.h"
#include "runtime/config.h"

namespace crucible::runtime {

struct GpuWorld {
  Device device = Device::cpu();     // this rank's device
  std::unique_ptr<comm::Comm> comm;  // over `world`; null: use the world itself
  std::string path;                  // "nccl" | "staged" | "" (one rank, or the CPU)
  int sharing = 1;                   // ranks on this rank's device (its memory is theirs together)
};

// On the CPU, or with one rank: the device run.device names and no Comm.
// Several ranks on GPUs: the ranks placed, this rank's GPU made current, the
// device Comm made (NCCL where every rank has its own GPU). Collective over
// `world`; every rank gets the same refusal (one line) or its GpuWorld.
Result<GpuWorld> open_gpu_world(comm::Comm& world, const Config& cfg);

}  // namespace crucible::runtime
