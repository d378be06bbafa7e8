// The CUDA runtime's DeviceMemory (comm/device_comm.h) for the staged path
// and for telling the NCCL Comm's device buffers from host ones.
#include <cuda_runtime.h>

#include "comm/cuda/cuda_status.h"
#include "comm/device_comm.h"

namespace crucible::comm {
namespace {

class CudaMemory final : public DeviceMemory {
 public:
  CudaMemory(int device, cudaStream_t stream) : device_(device), stream_(stream) {}

  bool is_device(const void* p) const override { return detail::on_cuda_device(p); }
  // On the kernels' stream, so the copy follows the work that wrote the data.
  Status to_host(void* host, const void* device, size_t bytes) override {
    CRUCIBLE_RETURN_IF_ERROR(
        cuda_status("staging", "cudaMemcpyAsync",
                    cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, stream_)));
    return cuda_status("staging", "cudaStreamSynchronize", cudaStreamSynchronize(stream_));
  }
  Status to_device(void* device, const void* host, size_t bytes) override {
    CRUCIBLE_RETURN_IF_ERROR(
        cuda_status("staging", "cudaMemcpyAsync",
                    cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, stream_)));
    return cuda_status("staging", "cudaStreamSynchronize", cudaStreamSynchronize(stream_));
  }
  Result<void*> alloc_pinned(size_t bytes) override {
    void* p = nullptr;
    if (Status s =
            cuda_status("staging", "cudaHostAlloc", cudaHostAlloc(&p, bytes, cudaHostAllocDefault));
        !s)
      return Status::internal(s.message() + " (" + std::to_string(bytes) +
                              " bytes of pinned memory)");
    return p;
  }
  void free_pinned(void* p) override { cudaFreeHost(p); }

 private:
  int device_;
  cudaStream_t stream_;
};

}  // namespace

namespace detail {
bool on_cuda_device(const void* p) {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    cudaGetLastError();  // an unregistered host pointer is not an error to keep
    return false;
  }
  return a.type == cudaMemoryTypeDevice;  // managed memory is never used (DESIGN.md)
}
}  // namespace detail

Status cuda_status(const char* op, const char* call, int err) {
  if (err == cudaSuccess) return Status::ok();
  cudaGetLastError();
  return Status::internal(std::string("[dist] ") + op + ": " + call +
                          " failed: " + cudaGetErrorString(static_cast<cudaError_t>(err)));
}

Result<std::unique_ptr<DeviceMemory>> cuda_device_memory(int device, CUstream_st* stream) {
  CRUCIBLE_RETURN_IF_ERROR(cuda_status("staging", "cudaSetDevice", cudaSetDevice(device)));
  return std::unique_ptr<DeviceMemory>(new CudaMemory(device, stream));
}

}  // namespace crucible::comm
