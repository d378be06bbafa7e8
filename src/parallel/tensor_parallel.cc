#include "parallel/tensor_parallel.h"

#include <cstring>

#include "core/clock.h"

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

void CommTensorParallel::allreduce(float* x, size_t n) {
  const size_t R = size_t(size());
  if (gathered_.size() < R * n) gathered_.resize(R * n);
  allgather(gathered_.data(), x, n);
  if (!error_) return;
  const float* g = gathered_.data();
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) {
    float sum = g[i];
    for (size_t r = 1; r < R; ++r) sum += g[r * n + i];
    x[i] = sum;
  }
}

double CommTensorParallel::take_seconds() {
  const double s = seconds_;
  seconds_ = 0;
  return s;
}

}  // namespace crucible::parallel
