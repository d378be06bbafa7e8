// The device Comms where crucible was built without CUDA: no GPU to reach.
#include "comm/device_comm.h"

namespace crucible::comm {

Result<std::unique_ptr<DeviceMemory>> cuda_device_memory(int, CUstream_st*) {
  return Status::invalid("[dist] this crucible was built without CUDA: no GPU buffers to stage");
}

Result<std::unique_ptr<Comm>> make_nccl_comm(Comm&, int, CUstream_st*) {
  return Status::invalid("[dist] this crucible was built without CUDA: no NCCL");
}

}  // namespace crucible::comm
