// Tensor: a typed, shaped, strided view of memory. Owning tensors share a
// Storage block from the Allocator that returns to the pool when the last
// tensor referring to it goes away; arena and borrowed tensors own nothing
// (the arena's reset() ends their life). Copying a Tensor copies the view,
// never the data. Not thread-safe for concurrent mutation of the same object.
#pragma once
#include <array>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>

#include "core/allocator.h"
#include "core/check.h"
#include "core/device.h"
#include "core/memory_source.h"
#include "core/dtype.h"

namespace crucible {

constexpr int kMaxDims = 6;

struct Shape {
  int ndim = 0;
  std::array<int64_t, kMaxDims> d{};

  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) {
    CRUCIBLE_CHECK(dims.size() <= kMaxDims, "[core] too many dimensions");
    for (int64_t x : dims) d[ndim++] = x;
  }
  int64_t operator[](int i) const { return d[i]; }
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < ndim; ++i) n *= d[i];
    return n;
  }
  bool operator==(const Shape& o) const {
    if (ndim != o.ndim) return false;
    for (int i = 0; i < ndim; ++i)
      if (d[i] != o.d[i]) return false;
    return true;
  }
  std::string str() const;
};

// A block of one device's memory from that device's pool
// (core/memory_source.h: the host's, or a GPU's once kernels::cuda::use_device
// registered it).
class Storage {
 public:
  Storage(size_t bytes, const char* tag, Device device = Device::cpu());
  ~Storage() { alloc_.release(ptr_); }
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  void* data() const { return ptr_; }
  Device device() const { return alloc_.source().device(); }
  MemorySource& source() const { return alloc_.source(); }

 private:
  Allocator& alloc_;
  void* ptr_;
};

class Tensor {
 public:
  Tensor() = default;

  // Owning, contiguous, in `device`'s memory; empty's contents are what the
  // pool block held (zero on its first use), zeros' are zero.
  static Tensor empty(Shape shape, DType dtype, const char* tag, Device device = Device::cpu());
  static Tensor zeros(Shape shape, DType dtype, const char* tag, Device device = Device::cpu());
  // From the step arena, on the arena's device: valid until its next reset().
  static Tensor arena(Arena& arena, Shape shape, DType dtype);
  // Borrowed view of memory owned elsewhere (e.g. a slice of a flat buffer).
  static Tensor borrow(void* data, Shape shape, DType dtype, Device device = Device::cpu());

  void* data() const { return data_; }
  float* f32() const {
    CRUCIBLE_CHECK(dtype_ == DType::f32, "[core] f32() on a non-f32 tensor");
    return static_cast<float*>(data_);
  }
  bf16* bf16_data() const {
    CRUCIBLE_CHECK(dtype_ == DType::bf16, "[core] bf16_data() on a non-bf16 tensor");
    return static_cast<bf16*>(data_);
  }
  DType dtype() const { return dtype_; }
  // Where the data lives: kernels on this thread must run there
  // (kernels/device_scope.h) to touch it.
  Device device() const { return device_; }
  const Shape& shape() const { return shape_; }
  int64_t dim(int i) const { return shape_[i]; }
  int ndim() const { return shape_.ndim; }
  int64_t stride(int i) const { return strides_[i]; }
  int64_t numel() const { return shape_.numel(); }
  size_t nbytes() const { return size_t(numel()) * dtype_size(dtype_); }
  bool defined() const { return data_ != nullptr; }
  bool is_contiguous() const;

  // Views sharing storage.
  Tensor reshape(Shape shape) const;                          // contiguous only
  Tensor slice(int dim, int64_t start, int64_t length) const;  // may be strided
  Tensor transpose(int a, int b) const;                        // swaps strides

 private:
  void set_contiguous_strides();
  std::shared_ptr<Storage> storage_;
  void* data_ = nullptr;
  DType dtype_ = DType::f32;
  Device device_;
  Shape shape_;
  std::array<int64_t, kMaxDims> strides_{};  // in elements
};

}  // namespace crucible
