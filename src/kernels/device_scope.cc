#include "kernels/device_scope.h"

#include <cstdio>
#include <cstdlib>

#include "core/check.h"
#include "kernels/cuda/cuda.h"
#include "kernels/kernels.h"

namespace crucible::kernels {

namespace {
thread_local ExecTarget target;
thread_local uint64_t waits = 0;
}  // namespace

const ExecTarget& current_target() { return target; }

DeviceScope::DeviceScope(Device device, CUstream_st* stream) : saved_(target) { target = {device, stream}; }
DeviceScope::DeviceScope(Device device)
    : DeviceScope(device, target.device == device ? target.stream : nullptr) {}
DeviceScope::~DeviceScope() { target = saved_; }

const KernelTable& table_here() {
  if (target.device.is_cpu()) return active();
  return cuda::kernel_table();
}

uint64_t host_waits() { return waits; }

void copy_async(Device device, void* dst, const void* src, size_t bytes) {
  DeviceScope on(device);  // this thread's stream where its scope is `device`'s
  copy_bytes(dst, src, bytes);
}

void copy_and_wait(Device device, void* dst, const void* src, size_t bytes) {
  ++waits;
  DeviceScope on(device);  // this thread's stream where its scope is `device`'s
  copy_bytes(dst, src, bytes);
  if (device.is_cuda())
    CRUCIBLE_CHECK(cuda::synchronize(target.stream).is_ok(), "[kernels] a copy between host and GPU failed");
}

void no_kernel_here(const char* kernel) {
  // A bug, not bad input: a run is refused before its first step where its
  // device lacks a kernel the step needs.
  std::fprintf(stderr, "[kernels] %s has no kernel on %s yet\n", kernel, target.device.str().c_str());
  std::abort();
}

}  // namespace crucible::kernels
