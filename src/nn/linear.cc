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

void TensorParallelPair::first_forward(Arena& arena, Linear& first, float* y, const float* x, int N,
                                       bool with_bias) {
  if (!sequence) {
    first.forward(y, x, N, with_bias);
    return;
  }
  x_rows = x;
  Arena::Mark m = arena.mark();
  first.forward(y, gather_rows(arena, *tp, x, size_t(N / tp->size()) * C), N, with_bias);
  arena.rewind(m);
  first.x = nullptr;  // gathered again by backward
}

void TensorParallelPair::last_forward(Arena& arena, Linear& last, float* out, const float* x, int N) {
  // Row-parallel: each rank's product is a partial sum; the first adds the bias.
  const bool bias = !tp || tp->rank() == 0;
  if (sequence) {
    Arena::Mark m = arena.mark();
    float* partial = arena.allocate_array<float>(size_t(N) * C);
    last.forward(partial, x, N, bias);
    tp->reduce_scatter(out, partial, size_t(N / tp->size()) * C);
    arena.rewind(m);
  } else {
    last.forward(out, x, N, bias);
    if (tp) tp->allreduce(out, size_t(N) * C);
  }
}

const float* TensorParallelPair::output_grad(Arena& arena, const float* dout, int N, bool keep) {
  if (sequence) return gather_rows(arena, *tp, dout, size_t(N / tp->size()) * C);  // a copy already
  return keep ? arena_copy(arena, dout, size_t(N) * C) : dout;
}

void TensorParallelPair::first_backward(Arena& arena, Linear& first, float* dx, const float* dy, int N,
                                        bool with_bias, BackwardPass pass) {
  const size_t NC = size_t(N) * C, rows = sequence ? NC / size_t(tp->size()) : NC;
  Arena::Mark m = arena.mark();
  if (sequence && pass != BackwardPass::kInput) first.x = gather_rows(arena, *tp, x_rows, rows);
  if (pass == BackwardPass::kWeight) {
    first.backward(nullptr, nullptr, N, with_bias, pass);
  } else if (sequence) {  // column-parallel: each rank's dx is its share, summed onto the rows
    float* partial = arena.allocate_array<float>(NC);
    first.backward(partial, dy, N, with_bias, pass);
    tp->reduce_scatter(dx, partial, rows);
  } else {
    first.backward(dx, dy, N, with_bias, pass);
    if (tp) tp->allreduce(dx, NC);  // column-parallel: each rank's dx is its share
  }
  if (sequence) {
    first.x = nullptr;
    arena.rewind(m);
  }
}

}  // namespace crucible::nn
