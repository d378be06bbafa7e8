// Where the calling thread's kernels run (DESIGN.md "Devices";
// docs/gpu.md "The device seam"): the CPU, or one GPU on one stream.
//
// Every kernels:: entry point (kernels.h's table wrappers, kernels::gemm)
// dispatches on it: the CPU's ISA table, or the CUDA backend's table
// (kernels/cuda/table.cc) launched on the scope's stream. So nn, optim and
// parallel call the same functions on either device and never name one;
// the trainer opens one DeviceScope for the step. Thread-local: a thread
// starts on the CPU (the data loader, the checkpoint writer and the serve
// engine's helpers never see a GPU scope they did not open). Scopes nest.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/device.h"

struct CUstream_st;

namespace crucible::kernels {

struct KernelTable;

struct ExecTarget {
  Device device;                  // Device::cpu() unless a scope says otherwise
  CUstream_st* stream = nullptr;  // a GPU's stream (nullptr: its legacy default stream)
};

// This thread's target.
const ExecTarget& current_target();

class DeviceScope {
 public:
  // Kernels called on this thread until the scope closes run on `device`
  // (on `stream` when a GPU). The GPU must have been made usable first
  // (kernels::cuda::use_device).
  DeviceScope(Device device, CUstream_st* stream);
  // The same device as the enclosing scope keeps its stream (a scope opened
  // inside a step keeps the step's, which a captured graph needs); another
  // device starts on its legacy default stream.
  explicit DeviceScope(Device device);
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  ExecTarget saved_;
};

// The table the calling thread's kernels come from: the CPU's active ISA
// table, or the CUDA backend's (whose entries are null for kernels the
// backend has not written yet; the wrappers in kernels.h refuse those by
// name). `kernel` names the entry for that refusal.
const KernelTable& table_here();
[[noreturn]] void no_kernel_here(const char* kernel);

// dst = src, `bytes`, where one side is `device`'s memory and the other the
// host's (or both the host's on the CPU), and waits for the copy: host code's
// way across at step edges (weights, moments, checkpoints, the step's
// scalars). On the calling thread's stream where its scope is `device`, so
// the copy follows the kernels queued there. A failed copy is a bug, checked.
void copy_and_wait(Device device, void* dst, const void* src, size_t bytes);
// The same without waiting (the step's scalars in): the host side must
// outlive the copy, or be pageable memory, which CUDA stages before returning.
void copy_async(Device device, void* dst, const void* src, size_t bytes);
// How many copy_and_wait calls this thread has made: each is a point where
// the host waited for the device (a step makes one: tests/runtime/train_step_test.cc).
uint64_t host_waits();

}  // namespace crucible::kernels
