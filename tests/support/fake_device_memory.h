// A DeviceMemory (comm/device_comm.h) whose "GPU" is an arena of host memory:
// the staged Comm's logic (what it stages, copies back and when) is tested on
// machines without a GPU, over real MPI ranks, against the plain MPI Comm.
#pragma once
#include <cstdlib>
#include <cstring>
#include <vector>

#include "comm/device_comm.h"

namespace crucible::testing {

struct FakeDeviceCounts {
  size_t to_host = 0, to_device = 0, pinned_allocs = 0, pinned_frees = 0;
};

class FakeDeviceMemory final : public comm::DeviceMemory {
 public:
  FakeDeviceMemory(size_t bytes, FakeDeviceCounts* counts) : arena_(bytes), counts_(counts) {}
  // The i-th device allocation: bump-allocated, 64-byte aligned.
  template <typename T>
  T* alloc(size_t n) {
    used_ = (used_ + 63) / 64 * 64;
    T* p = reinterpret_cast<T*>(arena_.data() + used_);
    used_ += n * sizeof(T);
    if (used_ > arena_.size()) std::abort();
    return p;
  }
  bool is_device(const void* p) const override {
    auto c = static_cast<const char*>(p);
    return c >= arena_.data() && c < arena_.data() + arena_.size();
  }
  Status to_host(void* host, const void* device, size_t bytes) override {
    if (!is_device(device) || is_device(host))
      return Status::internal("fake: to_host from a non-device pointer");
    ++counts_->to_host;
    std::memcpy(host, device, bytes);
    return Status::ok();
  }
  Status to_device(void* device, const void* host, size_t bytes) override {
    if (!is_device(device) || is_device(host))
      return Status::internal("fake: to_device to a non-device pointer");
    ++counts_->to_device;
    std::memcpy(device, host, bytes);
    return Status::ok();
  }
  Result<void*> alloc_pinned(size_t bytes) override {
    ++counts_->pinned_allocs;
    return std::malloc(bytes);
  }
  void free_pinned(void* p) override {
    ++counts_->pinned_frees;
    std::free(p);
  }

 private:
  std::vector<char> arena_;
  size_t used_ = 0;
  FakeDeviceCounts* counts_;
};

}  // namespace crucible::testing
