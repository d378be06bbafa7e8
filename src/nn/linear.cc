#include <algorithm>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "core/allocator.h"
#include "core/check.h"
#include "kernels/gemm.h"
#include "kernels/kernels.h"
#include "nn/layers.h"

namespace crucible::nn {
namespace {
// A row of ones of type t: db (1,out) += ones (1,N) @ dy (N,out) runs as one
// GEMM. One per device (the calling thread's, kernels/device_scope.h) and
// type, in that device's memory, grown, kept for the process.
const void* ones(int n, DType t) {
  struct Row {
    void* buf = nullptr;
    int len = 0;
  };
  static std::mutex mu;
  static std::map<std::tuple<int, int, int>, Row> rows;  // (device kind, index, bf16)
  const Device device = kernels::current_target().device;
  std::lock_guard<std::mutex> lock(mu);
  Row& r = rows[{int(device.kind), device.index, t == DType::bf16 ? 1 : 0}];
  if (n > r.len) {
    Allocator& alloc = Allocator::of(device);
    if (r.buf) alloc.release(r.buf);
    const size_t bytes = size_t(n) * dtype_size(t);
    r.buf = alloc.allocate(bytes, "nn.ones", true);
    std::vector<bf16> h16(t == DType::bf16 ? size_t(n) : 0, to_bf16(1.0f));
    std::vector<float> h32(t == DType::bf16 ? 0 : size_t(n), 1.0f);
    kernels::copy_bytes(r.buf, t == DType::bf16 ? static_cast<const void*>(h16.data()) : h32.data(), bytes);
    r.len = n;
  }
  return r.buf;
}
}  // namespace

void* arena_act(Arena& arena, size_t n, DType t) {
  if (t == DType::bf16) return arena.allocate_array<bf16>(n);
  return arena.allocate_array<float>(n);
}

const void* arena_copy(Arena& arena, const float* x, size_t n, DType t) {
  void* copy = arena_act(arena, n, t);
  if (t == DType::bf16)
    kernels::convert_to_bf16(static_cast<bf16*>(copy), x, n);
  else
    kernels::copy_bytes(copy, x, n * sizeof(float));
  return copy;
}

float* gather_rows(Arena& arena, TensorParallel& tp, const float* rows, size_t n) {
  float* all = arena.allocate_array<float>(n * size_t(tp.size()));
  tp.allgather(all, rows, n);
  return all;
}

const void* gather_rows(Arena& arena, TensorParallel& tp, const void* rows, size_t n, DType t) {
  if (t == DType::f32) return gather_rows(arena, tp, static_cast<const float*>(rows), n);
  bf16* all = arena.allocate_array<bf16>(n * size_t(tp.size()));
  tp.allgather_bf16(all, static_cast<const bf16*>(rows), n);
  return all;
}

const void* gemm_weights(const Param& p, DType t) {
  if (t == DType::f32) return p.value;
  CRUCIBLE_CHECK(p.value16, "[nn] a bf16 layer without the weights' bf16 copy");
  return p.value16;
}

// x (N,in) -> y (N,out) = x W (+ b)
void Linear::forward(void* y, DType y_type, const void* xin, int N, bool with_bias) {
  x = xin;
  kernels::gemm(act_type, y_type, false, false, N, out, in, xin, in, gemm_weights(w, act_type), out, y,
                out, false, with_bias ? b.value : nullptr);
}

void Linear::forward_gelu(void* pre, void* act, const void* xin, int N) {
  CRUCIBLE_CHECK(act_type == DType::bf16, "[nn] the fused GEMM+GELU is bf16");
  x = xin;
  kernels::gemm_bias_gelu_bf16(N, out, in, static_cast<const bf16*>(xin),
                               static_cast<const bf16*>(gemm_weights(w, DType::bf16)), b.value,
                               static_cast<bf16*>(pre), static_cast<bf16*>(act));
}

// dy (N,out) -> dx (N,in) = dy W^T ; dW (in,out) += x^T dy ; db (out) += 1^T dy
void Linear::backward(float* dx, const void* dyin, int N, bool with_bias, BackwardPass pass) {
  const DType t = act_type, f32 = DType::f32;
  const void* W = gemm_weights(w, t);
  if (pass == BackwardPass::kInput) {
    dy = dyin;
    if (dx) kernels::gemm(t, f32, false, true, N, in, out, dyin, out, W, out, dx, in, false);
    return;
  }
  if (pass == BackwardPass::kWeight) {
    CRUCIBLE_CHECK(dy, "[nn] Linear weight pass without its input pass");
    dyin = dy;
    dx = nullptr;
    dy = nullptr;
  }
  kernels::gemm(t, f32, true, false, in, out, N, x, in, dyin, out, w.grad, out, true);
  if (with_bias) kernels::gemm(t, f32, false, false, 1, out, N, ones(N, t), N, dyin, out, b.grad, out, true);
  if (dx) kernels::gemm(t, f32, false, true, N, in, out, dyin, out, W, out, dx, in, false);
}

bool Linear::backward_dgelu(bf16* dpre, float* dbias, const void* dyin, const bf16* pre, int N, BackwardPass pass) {
  CRUCIBLE_CHECK(act_type == DType::bf16 && pass != BackwardPass::kWeight,
                 "[nn] the fused GELU backward is bf16, in a pass with the input gradient");
  if (!kernels::gemm_dgelu_bf16(N, in, out, static_cast<const bf16*>(dyin),
                                static_cast<const bf16*>(gemm_weights(w, DType::bf16)), pre, dpre, dbias))
    return false;
  backward(nullptr, dyin, N, true, pass);  // dW and db (kInput: dy kept for them)
  return true;
}

void TensorParallelPair::first_forward(Arena& arena, Linear& first, void* y, const void* x, int N,
                                       bool with_bias) {
  if (!sequence) {
    first.forward(y, first.act_type, x, N, with_bias);
    return;
  }
  x_rows = x;
  Arena::Mark m = arena.mark();
  first.forward(y, first.act_type, gather_rows(arena, *tp, x, size_t(N / tp->size()) * C, first.act_type), N,
                with_bias);
  arena.rewind(m);
  first.x = nullptr;  // gathered again by backward
}

void TensorParallelPair::last_forward(Arena& arena, Linear& last, float* out, const void* x, int N) {
  // Row-parallel: each rank's product is a partial sum; the first adds the bias.
  const bool bias = !tp || tp->rank() == 0;
  if (sequence) {
    Arena::Mark m = arena.mark();
    float* partial = arena.allocate_array<float>(size_t(N) * C);
    last.forward(partial, DType::f32, x, N, bias);
    tp->reduce_scatter(out, partial, size_t(N / tp->size()) * C);
    arena.rewind(m);
  } else {
    last.forward(out, DType::f32, x, N, bias);
    if (tp) tp->allreduce(out, size_t(N) * C);
  }
}

const void* TensorParallelPair::output_grad(Arena& arena, const Linear& last, const float* dout, int N,
                                            bool keep) {
  if (sequence) {  // a copy already (bf16: then rounded)
    const float* all = gather_rows(arena, *tp, dout, size_t(N / tp->size()) * C);
    return last.act_type == DType::bf16 ? arena_copy(arena, all, size_t(N) * C, DType::bf16) : all;
  }
  if (last.act_type == DType::bf16) return arena_copy(arena, dout, size_t(N) * C, DType::bf16);
  return keep ? arena_copy(arena, dout, size_t(N) * C) : dout;
}

void TensorParallelPair::first_backward(Arena& arena, Linear& first, float* dx, const void* dy, int N,
                                        bool with_bias, BackwardPass pass) {
  const size_t NC = size_t(N) * C, rows = sequence ? NC / size_t(tp->size()) : NC;
  Arena::Mark m = arena.mark();
  if (sequence && pass != BackwardPass::kInput)
    first.x = gather_rows(arena, *tp, x_rows, rows, first.act_type);
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
