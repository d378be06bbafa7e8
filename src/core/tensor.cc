#include "core/tensor.h"

#include <algorithm>
#include <cstring>

namespace crucible {

std::string Shape::str() const {
  std::string s = "(";
  for (int i = 0; i < ndim; ++i) {
    if (i) s += ",";
    s += std::to_string(d[i]);
  }
  return s + ")";
}

void Tensor::set_contiguous_strides() {
  int64_t s = 1;
  for (int i = shape_.ndim - 1; i >= 0; --i) {
    strides_[i] = s;
    s *= shape_[i];
  }
}

Storage::Storage(size_t bytes, const char* tag, Device device)
    : alloc_(Allocator::of(device)), ptr_(alloc_.allocate(bytes, tag)) {}

Tensor Tensor::empty(Shape shape, DType dtype, const char* tag, Device device) {
  Tensor t;
  t.shape_ = shape;
  t.dtype_ = dtype;
  t.device_ = device;
  t.storage_ = std::make_shared<Storage>(std::max<size_t>(t.nbytes(), 1), tag, device);
  t.data_ = t.storage_->data();
  t.set_contiguous_strides();
  return t;
}

Tensor Tensor::zeros(Shape shape, DType dtype, const char* tag, Device device) {
  Tensor t = empty(shape, dtype, tag, device);
  t.storage_->source().zero(t.data_, t.nbytes());
  return t;
}

Tensor Tensor::arena(Arena& arena, Shape shape, DType dtype) {
  Tensor t;
  t.shape_ = shape;
  t.dtype_ = dtype;
  t.device_ = arena.device();
  t.data_ = arena.allocate(std::max<size_t>(t.nbytes(), 1));
  t.set_contiguous_strides();
  return t;
}

Tensor Tensor::borrow(void* data, Shape shape, DType dtype, Device device) {
  Tensor t;
  t.shape_ = shape;
  t.dtype_ = dtype;
  t.device_ = device;
  t.data_ = data;
  t.set_contiguous_strides();
  return t;
}

bool Tensor::is_contiguous() const {
  int64_t s = 1;
  for (int i = shape_.ndim - 1; i >= 0; --i) {
    if (shape_[i] != 1 && strides_[i] != s) return false;
    s *= shape_[i];
  }
  return true;
}

Tensor Tensor::reshape(Shape shape) const {
  CRUCIBLE_CHECK(is_contiguous(), "[core] reshape of a non-contiguous tensor");
  CRUCIBLE_CHECK(shape.numel() == numel(), "[core] reshape changes the element count");
  Tensor t = *this;
  t.shape_ = shape;
  t.set_contiguous_strides();
  return t;
}

Tensor Tensor::slice(int dim, int64_t start, int64_t length) const {
  CRUCIBLE_CHECK(dim >= 0 && dim < shape_.ndim, "[core] slice dimension out of range");
  CRUCIBLE_CHECK(start >= 0 && length >= 0 && start + length <= shape_[dim],
                 "[core] slice out of bounds");
  Tensor t = *this;
  t.data_ = static_cast<char*>(data_) + start * strides_[dim] * int64_t(dtype_size(dtype_));
  t.shape_.d[dim] = length;
  return t;
}

Tensor Tensor::transpose(int a, int b) const {
  CRUCIBLE_CHECK(a >= 0 && b >= 0 && a < shape_.ndim && b < shape_.ndim,
                 "[core] transpose dimension out of range");
  Tensor t = *this;
  std::swap(t.shape_.d[a], t.shape_.d[b]);
  std::swap(t.strides_[a], t.strides_[b]);
  return t;
}

}  // namespace crucible
