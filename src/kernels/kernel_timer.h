// Times one kernels:: call into its kernel class (core/kernel_stats.h), on
// whichever device the calling thread's kernels run (kernels/device_scope.h).
//
// On the CPU: the host clock around the call (ScopedKernelTimer). On a GPU a
// launch returns before the kernel runs, so the host clock would time the
// launch: the call, its FLOPs and bytes are counted at once and its time comes
// from a pair of CUDA events when kernel timing is on
// (kernels::cuda::set_kernel_timing), read back by collect_kernel_times() at a
// step's end; with timing off a GPU kernel is counted and not timed.
#pragma once
#include <optional>

#include "core/kernel_stats.h"
#include "kernels/cuda/cuda.h"
#include "kernels/device_scope.h"

namespace crucible::kernels {

class KernelTimer {
 public:
  KernelTimer(KernelClass c, double flops, double bytes) : cls_(c) {
    const ExecTarget& here = current_target();
    if (here.device.is_cpu()) {
      host_.emplace(c, flops, bytes);
      return;
    }
    KernelClassStats& s = kernel_stats()[size_t(c)];
    s.calls += 1;
    s.flops += flops;
    s.bytes += bytes;
    stream_ = here.stream;
    slot_ = cuda::kernel_begin(stream_);
  }
  ~KernelTimer() {
    if (slot_ >= 0) cuda::kernel_end(slot_, cls_, stream_);
  }
  KernelTimer(const KernelTimer&) = delete;
  KernelTimer& operator=(const KernelTimer&) = delete;

 private:
  KernelClass cls_;
  std::optional<ScopedKernelTimer> host_;
  cuda::Stream stream_ = nullptr;
  int slot_ = -1;
};

}  // namespace crucible::kernels
