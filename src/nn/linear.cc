#include <algorithm>
#include <vector>

#include "core/allocator.h"
#include "core/check.h"
#include "kernels/gemm.h"
#include "nn/layers.h"

namespace crucible::nn {
namespace {
// A row of ones: db (1,out) += ones (1,N) @ dy (N,out) runs as one GEMM.
const float* ones(int n) {
  static float* buf = nullptr;
  static int len = 0;
  if (n > len) {
    if (buf) Allocator::global().release(buf);
    buf = static_cast<float*>(Allocator::global().allocate(size_t(n) * 4, "nn.ones", true));
    std::fill(buf, buf + n, 1.0f);
    len = n;
  }
  return buf;
}
}  // namespace

const float* arena_copy(Arena& arena, const float* x, size_t n) {
  float* copy = arena.allocate_array<float>(n);
  std::copy(x, x + n, copy);
  return copy;
}

float* gather_rows(Arena& arena, TensorParallel& tp, const float* rows, size_t n) {
  float* all = arena.allocate_array<float>(n * size_t(tp.size()));
  tp.allgather(all, rows, n);
  return all;
}

// x (N,in) -> y (N,out) = x W (+ b)
void Linear::forward(float* y, const float* xin, int N, bool with_bias) {
  x = xin;
  kernels::gemm(false, false, N, out, in, xin, in, w.value, out, y, out, false,
                with_bias ? b.value : nullptr);
}

// dy (N,out) -> dx (N,in) = dy W^T ; dW (in,out) += x^T dy ; db (out) += 1^T dy
void Linear::backward(float* dx, const float* dyin, int N, bool with_bias, BackwardPass pass) {
  if (pass == BackwardPass::kInput) {
    dy = dyin;
    if (dx) kernels::gemm(false, true, N, in, out, dyin, out, w.value, out, dx, in, false);
    return;
  }
  if (pass == BackwardPass::kWeight) {
    CRUCIBLE_CHECK(dy, "[nn] Linear weight pass without its input pass");
    dyin = dy;
    dx = nullptr;
    dy = nullptr;
  }
  kernels::gemm(true, false, in, out, N, x, in, dyin, out, w.grad, out, true);
  if (with_bias) kernels::gemm(false, false, 1, out, N, ones(N), N, dyin, out, b.grad, out, true);
  if (dx) kernels::gemm(false, true, N, in, out, dyin, out, w.value, out, dx, in, false);
}

}  // namespace crucible::nn
