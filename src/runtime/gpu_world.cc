#include "runtime/gpu_world.h"

#include "comm/device_comm.h"
#include "kernels/cuda/cuda.h"
#include "runtime/gpu_placement.h"
#include "runtime/world.h"

namespace crucible::runtime {

Result<GpuWorld> open_gpu_world(comm::Comm& world, const Config& cfg) {
  auto named = Device::parse(cfg.run.device);
  if (!named) return Status::invalid("[train] run.device: " + named.status().message());
  GpuWorld g;
  g.device = *named;
  if (named->is_cpu() || world.size() == 1) return g;
  // "cuda" places each rank by local order; "cuda:N" pins a host's ranks to N.
  const int pinned = cfg.run.device == "cuda" ? -1 : named->index;
  auto placed = place_ranks_on_gpus(world, kernels::cuda::device_count(), cfg.dist.tp, pinned,
                                    cfg.dist.share_gpus);
  if (!placed) return placed.status();
  g.device = Device::cuda(placed->gpu[size_t(world.rank())]);
  g.sharing = placed->sharing[size_t(world.rank())];
  // This rank's GPU, agreed before any collective that needs it.
  Status local = kernels::cuda::use_device(g.device.index);
  auto info =
      local ? kernels::cuda::device_info(g.device.index) : Result<kernels::cuda::DeviceInfo>(local);
  CRUCIBLE_RETURN_IF_ERROR(agree(world, info.status()));
  auto path = comm::choose_device_path(world, info->pci_bus_id);
  if (!path) return path.status();
  g.path = comm::path_name(*path);
  if (*path == comm::DevicePath::kNccl) {
    auto c = comm::make_nccl_comm(world, g.device.index,
                                  nullptr);  // the kernels' stream: the default one
    CRUCIBLE_RETURN_IF_ERROR(agree(world, c.status()));
    g.comm = std::move(*c);
  } else {
    auto memory = comm::cuda_device_memory(g.device.index, nullptr);
    CRUCIBLE_RETURN_IF_ERROR(agree(world, memory.status()));
    g.comm = comm::make_staged_comm(world, std::move(*memory));
  }
  return g;
}

}  // namespace crucible::runtime
