#include "kernels/kernels.h"
#include "nn/layers.h"

namespace crucible::nn {

// x (N,C) -> pre (N,H) = x W_fc ; act = gelu(pre + b_fc) ; out (N,C) = act W_proj + b_proj;
// sequence parallel: x and out are (N/tp, C) rows (as CausalSelfAttention).
void MLP::forward(Arena& arena, float* out, const float* x, int N) {
  const int H = c_fc.out;
  pre = arena.allocate_array<float>(size_t(N) * H);
  act = arena.allocate_array<float>(size_t(N) * H);
  if (sequence) {  // the rows gathered for c_fc only: backward gathers them again
    x_rows = x;
    Arena::Mark m = arena.mark();
    c_fc.forward(pre, gather_rows(arena, *tp, x, size_t(N / tp->size()) * C), N, /*with_bias=*/false);
    arena.rewind(m);
    c_fc.x = nullptr;
  } else {
    c_fc.forward(pre, x, N, /*with_bias=*/false);
  }
  kernels::bias_gelu_forward(act, pre, c_fc.b.value, N, H);
  const bool bias = !tp || tp->rank() == 0;  // row-parallel: bias once
  if (sequence) {
    Arena::Mark m = arena.mark();
    float* partial = arena.allocate_array<float>(size_t(N) * C);
    c_proj.forward(partial, act, N, bias);
    tp->reduce_scatter(out, partial, size_t(N / tp->size()) * C);
    arena.rewind(m);
  } else {
    c_proj.forward(out, act, N, bias);
    if (tp) tp->allreduce(out, size_t(N) * C);
  }
}

// dout (N,C) -> dx (N,C); sequence parallel: (N/tp, C) rows of each.
void MLP::backward(Arena& arena, float* dx, const float* dout, int N, BackwardPass pass) {
  const int H = c_fc.out;
  const size_t NC = size_t(N) * C, rows = sequence ? NC / size_t(tp->size()) : NC;
  if (pass == BackwardPass::kWeight) {
    c_proj.backward(nullptr, nullptr, N, true, pass);
    Arena::Mark m = arena.mark();
    if (sequence) c_fc.x = gather_rows(arena, *tp, x_rows, rows);
    c_fc.backward(nullptr, nullptr, N, false, pass);
    if (sequence) c_fc.x = nullptr, arena.rewind(m);
    return;
  }
  const bool keep = pass == BackwardPass::kInput;  // the weight pass reads these later
  Arena::Mark m = arena.mark();
  if (sequence)  // a copy, as in CausalSelfAttention::backward
    dout = gather_rows(arena, *tp, dout, rows);
  else if (keep)
    dout = arena_copy(arena, dout, NC);
  float* dact = arena.allocate_array<float>(size_t(N) * H);
  c_proj.backward(dact, dout, N, true, pass);
  kernels::bias_gelu_backward(dact, c_fc.b.grad, dact, pre, N, H);  // dact := dpre
  if (sequence) {  // column-parallel: each rank's dx is its columns' share, summed onto the rows
    Arena::Mark scratch = arena.mark();
    if (!keep) c_fc.x = gather_rows(arena, *tp, x_rows, rows);
    float* partial = arena.allocate_array<float>(NC);
    c_fc.backward(partial, dact, N, /*with_bias=*/false, pass);
    tp->reduce_scatter(dx, partial, rows);
    c_fc.x = nullptr;
    arena.rewind(scratch);
  } else {
    c_fc.backward(dx, dact, N, /*with_bias=*/false, pass);
    if (tp) tp->allreduce(dx, NC);  // column-parallel: each rank's dx is its columns' share
  }
  if (!keep) arena.rewind(m);
}

}  // namespace crucible::nn
