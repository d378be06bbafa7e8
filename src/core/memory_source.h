// Where the allocator's blocks come from (DESIGN.md "Memory", "Devices").
//
// A MemorySource maps and unmaps whole blocks; the Allocator (core/allocator.h)
// caches them per size class over one source, so pools, the step arena, the
// peak and the leak report work the same for every kind of memory. The host
// source is built in; others (pinned host, CUDA device memory) are provided by
// the backend that owns them (kernels/cuda) and registered once, for the
// process lifetime. No managed (unified) memory. Thread-safe.
#pragma once
#include <cstddef>

#include "core/device.h"

namespace crucible {

enum class MemoryKind : uint8_t { kHost, kPinnedHost, kDevice };

class MemorySource {
 public:
  virtual ~MemorySource() = default;
  virtual Device device() const = 0;  // where kernels can read it (pinned host: cpu)
  virtual MemoryKind kind() const = 0;
  virtual const char* name() const = 0;  // "host", "pinned host", "cuda:0"
  // `bytes` of fresh, zeroed memory, 64-byte aligned at least; nullptr when
  // the source has none left.
  virtual void* map(size_t bytes) = 0;
  virtual void unmap(void* p, size_t bytes) = 0;
  // Zeroes `bytes` at p, memory of this source (a pooled block is reused as
  // it was left; Tensor::zeros clears it). Host sources: memset.
  virtual void zero(void* p, size_t bytes);
};

// Pageable host memory: blocks of 1 MiB and more are 2 MiB aligned and
// advised for transparent huge pages; every block is pre-faulted (zeroed)
// when mapped (first touch costs ~14 us per 4 KiB page on VMs).
MemorySource& host_memory();

// A source registered by a backend (kept for the process lifetime); the
// registered source for (kind, device), or nullptr when none is (a build
// without CUDA, a machine without a GPU).
void register_memory_source(MemorySource* source);
MemorySource* find_memory_source(MemoryKind kind, Device device);
// The memory `device` computes on: the host's for the CPU, the GPU's own for
// a GPU (registered by kernels::cuda::use_device); nullptr when there is none.
MemorySource* memory_of(Device device);

}  // namespace crucible
