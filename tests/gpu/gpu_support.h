// What the GPU tests share: skipping where there is no GPU (saying why:
// ctest reports it "Skipped", never passed) and device buffers filled from
// and read back into host vectors.
#pragma once
#include <gtest/gtest.h>

#include <vector>

#include "core/allocator.h"
#include "kernels/cuda/cuda.h"

namespace crucible::gpu_test {

// Skips the calling test where there is no GPU, saying why.
#define REQUIRE_GPU()                                                                                           \
  do {                                                                                                          \
    if (!::crucible::kernels::cuda::compiled())                                                                 \
      GTEST_SKIP() << "built without the CUDA backend (no nvcc at build time)";                                 \
    if (::crucible::kernels::cuda::device_count() == 0) GTEST_SKIP() << "no CUDA GPU on this machine (or no driver)"; \
    ASSERT_TRUE(::crucible::kernels::cuda::use_device(0).is_ok());                                              \
  } while (0)

// n elements of T in cuda:0's memory (through the allocator), released on scope exit.
template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t n)
      : n_(n),
        alloc_(&Allocator::of(Device::cuda(0))),
        p_(static_cast<T*>(alloc_->allocate(std::max<size_t>(1, n) * sizeof(T), "gpu test buffer"))) {}
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) {
    EXPECT_TRUE(kernels::cuda::copy_to_device(p_, host.data(), n_ * sizeof(T), nullptr).is_ok());
  }
  ~DeviceBuffer() { alloc_->release(p_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  T* get() const { return p_; }
  // Waits for the default stream, then copies back.
  std::vector<T> host() const {
    std::vector<T> out(n_);
    EXPECT_TRUE(kernels::cuda::copy_to_host(out.data(), p_, n_ * sizeof(T), nullptr).is_ok());
    EXPECT_TRUE(kernels::cuda::synchronize(nullptr).is_ok());
    return out;
  }

 private:
  size_t n_;
  Allocator* alloc_;
  T* p_;
};

}  // namespace crucible::gpu_test
