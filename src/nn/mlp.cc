#include "kernels/kernels.h"
#include "nn/layers.h"

namespace crucible::nn {

// x (N,C) -> pre (N,H) = x W_fc ; act = gelu(pre + b_fc) ; out (N,C) = act W_proj + b_proj
void MLP::forward(Arena& arena, float* out, const float* x, int N) {
  const int H = c_fc.out;
  pre = arena.allocate_array<float>(size_t(N) * H);
  act = arena.allocate_array<float>(size_t(N) * H);
  c_fc.forward(pre, x, N, /*with_bias=*/false);
  kernels::bias_gelu_forward(act, pre, c_fc.b.value, N, H);
  c_proj.forward(out, act, N, /*with_bias=*/!tp || tp->rank() == 0);  // row-parallel: bias once
  if (tp) tp->allreduce(out, size_t(N) * C);
}

// dout (N,C) -> dx (N,C)
void MLP::backward(Arena& arena, float* dx, const float* dout, int N, BackwardPass pass) {
  const int H = c_fc.out;
  const size_t NC = size_t(N) * C;
  if (pass == BackwardPass::kWeight) {
    c_proj.backward(nullptr, nullptr, N, true, pass);
    c_fc.backward(nullptr, nullptr, N, false, pass);
    return;
  }
  const bool keep = pass == BackwardPass::kInput;  // the weight pass reads these later
  Arena::Mark m = arena.mark();
  if (keep) dout = arena_copy(arena, dout, NC);  // the block's running gradient: it changes after this
  float* dact = arena.allocate_array<float>(size_t(N) * H);
  c_proj.backward(dact, dout, N, true, pass);
  kernels::bias_gelu_backward(dact, c_fc.b.grad, dact, pre, N, H);  // dact := dpre
  c_fc.backward(dx, dact, N, /*with_bias=*/false, pass);
  if (tp) tp->allreduce(dx, NC);  // column-parallel: each rank's dx is its columns' share
  if (!keep) arena.rewind(m);
}

}  // namespace crucible::nn
