// The CUDA backend's runtime: devices, memory sources, copies
// (kernels/cuda/cuda.h). Compiled only where the CUDA toolkit is.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "kernels/cuda/cuda.h"

namespace crucible::kernels::cuda {

namespace {

Status cuda_error(cudaError_t e, const std::string& what) {
  return Status::invalid("[cuda] " + what + ": " + cudaGetErrorString(e));
}

// Device memory of one GPU through cudaMalloc, zeroed when mapped (the host
// source's contract). No managed memory: a pointer is on the device only.
class DeviceMemory final : public MemorySource {
 public:
  explicit DeviceMemory(int index) : index_(index), name_("cuda:" + std::to_string(index)) {}
  Device device() const override { return Device::cuda(index_); }
  MemoryKind kind() const override { return MemoryKind::kDevice; }
  const char* name() const override { return name_.c_str(); }
  void* map(size_t bytes) override {
    int current = 0;
    cudaGetDevice(&current);
    if (current != index_) cudaSetDevice(index_);
    void* p = nullptr;
    if (cudaMalloc(&p, bytes) != cudaSuccess) p = nullptr;
    if (p && cudaMemset(p, 0, bytes) != cudaSuccess) cudaFree(p), p = nullptr;
    if (current != index_) cudaSetDevice(current);
    cudaGetLastError();  // a failed cudaMalloc is an answer (nullptr), not a sticky error
    return p;
  }
  void unmap(void* p, size_t) override { cudaFree(p); }
  // Synchronous: a zeroed tensor is zero before anything reads it, on any stream.
  void zero(void* p, size_t bytes) override {
    if (cudaMemset(p, 0, bytes) != cudaSuccess) {
      std::fprintf(stderr, "[cuda] zeroing %zu bytes on %s: %s\n", bytes, name_.c_str(),
                   cudaGetErrorString(cudaGetLastError()));
      std::abort();
    }
  }

 private:
  int index_;
  std::string name_;
};

// Page-locked host memory for copies at step edges (the batch in,
// checkpoint snapshots out): cudaHostAlloc, portable across GPUs.
class PinnedMemory final : public MemorySource {
 public:
  Device device() const override { return Device::cpu(); }
  MemoryKind kind() const override { return MemoryKind::kPinnedHost; }
  const char* name() const override { return "pinned host"; }
  void* map(size_t bytes) override {
    void* p = nullptr;
    if (cudaHostAlloc(&p, bytes, cudaHostAllocPortable) != cudaSuccess) {
      cudaGetLastError();
      return nullptr;
    }
    std::memset(p, 0, bytes);
    return p;
  }
  void unmap(void* p, size_t) override { cudaFreeHost(p); }
};

}  // namespace

bool compiled() { return true; }

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // no driver, no GPU: none to use
    return 0;
  }
  return n;
}

Result<DeviceInfo> device_info(int index) {
  const int n = device_count();
  if (index < 0 || index >= n)
    return Status::invalid("[cuda] no GPU cuda:" + std::to_string(index) + " (this machine has " +
                           std::to_string(n) + (n == 1 ? " GPU" : " GPUs") + ")");
  cudaDeviceProp prop{};
  if (cudaError_t e = cudaGetDeviceProperties(&prop, index); e != cudaSuccess)
    return cuda_error(e, "cudaGetDeviceProperties(" + std::to_string(index) + ")");
  char bus[32] = {};
  if (cudaError_t e = cudaDeviceGetPCIBusId(bus, sizeof bus, index); e != cudaSuccess)
    return cuda_error(e, "cudaDeviceGetPCIBusId(" + std::to_string(index) + ")");
  return DeviceInfo{
      prop.name, prop.major, prop.minor, prop.multiProcessorCount, uint64_t(prop.totalGlobalMem),
      bus};
}

Status use_device(int index) {
  auto info = device_info(index);
  if (!info) return info.status();
  if (cudaError_t e = cudaSetDevice(index); e != cudaSuccess) return cuda_error(e, "cudaSetDevice");
  static std::mutex mu;
  static std::vector<DeviceMemory*> devices;  // leaked with the registry
  static PinnedMemory* pinned = nullptr;
  std::lock_guard<std::mutex> lock(mu);
  if (!pinned) register_memory_source(pinned = new PinnedMemory());
  if (!find_memory_source(MemoryKind::kDevice, Device::cuda(index))) {
    devices.push_back(new DeviceMemory(index));
    register_memory_source(devices.back());
  }
  return Status::ok();
}

Result<uint64_t> free_memory(int index) {
  auto info = device_info(index);
  if (!info) return info.status();
  int current = 0;
  cudaGetDevice(&current);
  if (current != index) cudaSetDevice(index);
  size_t free = 0, total = 0;
  const cudaError_t e = cudaMemGetInfo(&free, &total);
  if (current != index) cudaSetDevice(current);
  if (e != cudaSuccess) return cuda_error(e, "cudaMemGetInfo");
  return uint64_t(free);
}

Status copy_to_device(void* dst, const void* src, size_t bytes, Stream s) {
  cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s);
  return e == cudaSuccess ? Status::ok() : cuda_error(e, "copy to device");
}

Status copy_to_host(void* dst, const void* src, size_t bytes, Stream s) {
  cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s);
  return e == cudaSuccess ? Status::ok() : cuda_error(e, "copy to host");
}

Result<bool> enable_peer_access(int from, int to) {
  int can = 0;
  if (cudaError_t e = cudaDeviceCanAccessPeer(&can, from, to); e != cudaSuccess)
    return cuda_error(e, "cudaDeviceCanAccessPeer");
  if (!can) return false;
  int was = 0;
  if (cudaError_t e = cudaGetDevice(&was); e != cudaSuccess) return cuda_error(e, "cudaGetDevice");
  if (cudaError_t e = cudaSetDevice(from); e != cudaSuccess) return cuda_error(e, "cudaSetDevice");
  cudaError_t e = cudaDeviceEnablePeerAccess(to, 0);
  if (e == cudaErrorPeerAccessAlreadyEnabled)
    (void)cudaGetLastError(), e = cudaSuccess;  // clears it
  cudaSetDevice(was);
  if (e != cudaSuccess) return cuda_error(e, "cudaDeviceEnablePeerAccess");
  return true;
}

Status copy_peer(void* dst, int dst_device, const void* src, int src_device, size_t bytes,
                 Stream s) {
  cudaError_t e = cudaMemcpyPeerAsync(dst, dst_device, src, src_device, bytes, s);
  return e == cudaSuccess ? Status::ok() : cuda_error(e, "copy between GPUs");
}

Status synchronize(Stream s) {
  cudaError_t e = cudaStreamSynchronize(s);
  return e == cudaSuccess ? Status::ok() : cuda_error(e, "stream synchronize");
}

Status last_error(const char* where) {
  cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? Status::ok() : cuda_error(e, where);
}

}  // namespace crucible::kernels::cuda
