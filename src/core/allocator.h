// Memory: every tensor comes from here.
//
// Allocator: a process-wide caching pool over one memory source
// (core/memory_source.h: host, pinned host, a CUDA device); global() is the
// host's, on(source) any other's. Requests are rounded up to a size class
// (four classes per power of two), freed blocks are kept on per-class free
// lists and handed out again, never returned to the source while the process
// runs (first touch of a fresh 4 KiB page costs ~14 us on the VMs we
// measured; cudaMalloc synchronises the device). Fresh blocks come zeroed
// (the host's pre-faulted; blocks of 1 MiB and more 2 MiB aligned and advised
// for transparent huge pages). In-use, peak and leak accounting are per
// source. Thread-safe.
//
// Arena: the per-step activation arena. A bump allocator over one block from
// the Allocator; reset() at the start of every step makes all of it reusable.
// If a step needed more than the current block, the next reset() replaces the
// chain by one block of the high-water size, so from the second step on a
// step performs no allocation at all. Not thread-safe: one owner.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/memory_source.h"

namespace crucible {

struct AllocatorStats {
  size_t in_use = 0;       // bytes (size-class rounded) handed out and not released
  size_t peak = 0;         // max of in_use
  size_t cached = 0;       // bytes on free lists, ready for reuse
  size_t mapped = 0;       // bytes obtained from the OS in total (in_use + cached)
  uint64_t os_allocs = 0;  // number of blocks obtained from the OS
  uint64_t allocs = 0;     // number of allocate() calls
};

class Allocator {
 public:
  // The host's pool.
  static Allocator& global();
  // The pool over `source` (one per source, made on first use).
  static Allocator& on(MemorySource& source);
  // The pool of the memory `device` computes on (core/memory_source.h
  // memory_of): global() for the CPU. A GPU whose memory no backend
  // registered (kernels::cuda::use_device first) is a bug, checked.
  static Allocator& of(Device device);
  // The pool of pinned host memory (page-locked: a GPU copies from it without
  // staging), or nullptr where no backend registered one (a machine without a GPU).
  static Allocator* pinned();
  explicit Allocator(MemorySource& source) : source_(source) {}
  MemorySource& source() const { return source_; }

  // Returns 64-byte aligned, zero-initialised-on-first-use memory of at least
  // `bytes`. `tag` names the allocation site class in leak reports; it must be
  // a string literal (stored by pointer). `persistent` marks a process-lifetime
  // cache (e.g. the GEMM scratchpad): never reported as a leak at shutdown.
  void* allocate(size_t bytes, const char* tag, bool persistent = false);
  void release(void* p);

  AllocatorStats stats() const;
  // Restarts the peak at what is in use now (to measure one phase's peak).
  void reset_peak();
  // Live allocations grouped by tag, largest first. Empty when nothing leaked.
  std::vector<std::pair<std::string, size_t>> live_by_tag() const;
  // Prints live non-persistent allocations (if any) to `out`; returns their count.
  size_t report_leaks(FILE* out) const;
  // Returns all cached blocks to the OS (for tests and shutdown).
  void trim();

  static size_t size_class(size_t bytes);

 private:
  struct Live {
    size_t bytes;
    const char* tag;
    bool persistent;
  };
  void* map_fresh(size_t bytes);
  void unmap(void* p, size_t bytes);

  MemorySource& source_;
  mutable std::mutex mu_;
  std::unordered_map<size_t, std::vector<void*>> free_;
  std::unordered_map<void*, Live> live_;
  AllocatorStats stats_;
};

class Arena {
 public:
  explicit Arena(const char* tag, Allocator& alloc = Allocator::global());
  ~Arena();
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  void* allocate(size_t bytes, size_t align = 64);
  template <typename T>
  T* allocate_array(size_t n) {
    return static_cast<T*>(allocate(n * sizeof(T)));
  }
  void reset();
  // Makes the arena one chunk of at least `bytes` (between steps: nothing in
  // use), so a step whose need is known up front never grows a chain.
  void reserve(size_t bytes);

  // Scoped scratch: rewind(mark()) releases everything allocated after the
  // mark (e.g. one layer's backward temporaries) for reuse within the step.
  struct Mark {
    size_t chunk, used, used_total;
  };
  Mark mark() const;
  void rewind(const Mark& m);

  // The device its memory is on (its allocator's source's).
  Device device() const { return alloc_.source().device(); }
  size_t used() const { return used_total_; }
  size_t high_water() const { return high_water_; }
  size_t capacity() const;

 private:
  struct Chunk {
    char* base;
    size_t size;
    size_t used;
  };
  Allocator& alloc_;
  const char* tag_;
  std::vector<Chunk> chunks_;
  size_t current_ = 0;  // chunk being bumped
  size_t used_total_ = 0;
  size_t high_water_ = 0;
};

}  // namespace crucible
