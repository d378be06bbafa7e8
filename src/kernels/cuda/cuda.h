// crucible's CUDA backend, host side (DESIGN.md "Devices"; docs/architecture.md
// "The device seam").
//
// This header includes no CUDA header: a stream is CUDA's own opaque
// `CUstream_st*` (what cudaStream_t is), so every layer can name one. A build
// without the CUDA toolkit links no_cuda.cc instead of the .cu/.cc sources:
// compiled() is false, device_count() is 0 and use_device() refuses with one
// line, as on a machine without a GPU or driver.
//
// Kernels take the stream they run on, llm.c's way: one launcher per op, the
// kernel and its geometry side by side in its .cu file, shapes in comments;
// each is checked against its naive reference in kernels/ref on the device
// machine (tests/gpu, ctest label `gpu`, skipped without a GPU). Launchers do
// not synchronise or allocate. Thread-safety: as CUDA's runtime (one device
// per thread; use_device() sets the calling thread's).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/dtype.h"
#include "core/memory_source.h"
#include "core/status.h"

struct CUstream_st;

namespace crucible::kernels::cuda {

using Stream = CUstream_st*;  // nullptr: the legacy default stream

// Whether this build has the CUDA backend.
bool compiled();
// GPUs this process can use; 0 without a GPU, a driver or the backend.
int device_count();

struct DeviceInfo {
  std::string name;
  int major = 0, minor = 0;  // compute capability
  int multiprocessors = 0;
  uint64_t memory_bytes = 0;
};
// invalid, naming the index and how many GPUs there are, when there is none.
Result<DeviceInfo> device_info(int index);

// Makes GPU `index` the calling thread's and registers its memory sources
// (device memory, pinned host memory) with core/memory_source.h, so
// Allocator::on(*find_memory_source(MemoryKind::kDevice, Device::cuda(i)))
// pools it. One line naming the problem when there is no such GPU.
Status use_device(int index);

// Copies and waits, at step edges only. Errors name the call and CUDA's text.
Status copy_to_device(void* dst, const void* src, size_t bytes, Stream s);
Status copy_to_host(void* dst, const void* src, size_t bytes, Stream s);
Status synchronize(Stream s);
// The last launch's error, if any (launchers do not check, so a step checks
// once).
Status last_error(const char* where);

// ---- kernels (contracts as kernels/signatures.inc, plus the stream) ----

// AdamW over flat buffers, one thread per element (a grid-stride loop):
// p, m, v (n) f32 updated in place; g (n) f32 read, times grad_scale (the clip
// factor); p_bf16 (n) rewritten from p when not null (the bf16 copy); t is
// the step for the bias corrections (computed in double on the host).
void adamw(float* p, bf16* p_bf16, const float* g, float* m, float* v, size_t n, float lr, float beta1,
           float beta2, float eps, float weight_decay, float grad_scale, int t, Stream s);

}  // namespace crucible::kernels::cuda
