#include "parallel/tensor_parallel.h"

#include <cstring>

#include "core/clock.h"
#include "kernels/device_scope.h"
#include "kernels/kernels.h"

namespace crucible::parallel {

void CommTensorParallel::allgather(float* out, const float* in, size_t n) {
  if (!error_) return;
  const int64_t t0 = now_ns();
  if (Status s = group_.allgather(in, out, std::vector<size_t>(size_t(size()), n)); !s) error_ = s;
  seconds_ += (now_ns() - t0) * 1e-9;
}

// Bits only: the pieces are equal-sized, so a byte allgather moves them.
void CommTensorParallel::allgather_bf16(bf16* out, const bf16* in, size_t n) {
  if (!error_) return;
  const int64_t t0 = now_ns();
  if (Status s = group_.allgather_bytes(in, n * sizeof(bf16), out); !s) error_ = s;
  seconds_ += (now_ns() - t0) * 1e-9;
}

// Each piece is summed on the one rank that keeps it, so no two ranks need to
// agree on its bits: MPI's own reduce-scatter does.
void CommTensorParallel::reduce_scatter(float* out, const float* in, size_t n) {
  if (!error_) return;
  const int64_t t0 = now_ns();
  if (Status s = group_.reduce_scatter(in, out, std::vector<size_t>(size_t(size()), n)); !s) error_ = s;
  seconds_ += (now_ns() - t0) * 1e-9;
}

// Gathered, then summed in rank order, one add at a time through the kernel
// table (on the device the activations live on): every rank, every layout
// and either device computes ((g0 + g1) + g2) + ... in f32, the same bits.
void CommTensorParallel::allreduce(float* x, size_t n) {
  const size_t R = size_t(size());
  const Device device = kernels::current_target().device;
  if (gathered_.numel() < int64_t(R * n) || gathered_.device() != device)
    gathered_ = Tensor::empty(Shape{int64_t(R * n)}, DType::f32, "tp.allreduce", device);
  float* g = gathered_.f32();
  allgather(g, x, n);
  if (!error_) return;
  if (R == 1) return kernels::copy_bytes(x, g, n * sizeof(float));
  kernels::add(x, g, g + n, n);
  for (size_t r = 2; r < R; ++r) kernels::add(x, x, g + r * n, n);
}

double CommTensorParallel::take_seconds() {
  const double s = seconds_;
  seconds_ = 0;
  return s;
}

}  // namespace crucible::parallel
