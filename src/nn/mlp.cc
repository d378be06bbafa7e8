#include "kernels/kernels.h"
#include "nn/layers.h"

namespace crucible::nn {

// x (N,C) -> pre (N,4C) = x W_fc ; act = gelu(pre + b_fc) ; out (N,C) = act W_proj + b_proj
void MLP::forward(Arena& arena, float* out, const float* x, int N) {
  pre = arena.allocate_array<float>(size_t(N) * 4 * C);
  act = arena.allocate_array<float>(size_t(N) * 4 * C);
  c_fc.forward(pre, x, N, /*with_bias=*/false);
  kernels::bias_gelu_forward(act, pre, c_fc.b.value, N, 4 * C);
  c_proj.forward(out, act, N);
}

// dout (N,C) -> dx (N,C)
void MLP::backward(Arena& arena, float* dx, const float* dout, int N, BackwardPass pass) {
  const size_t NC = size_t(N) * C;
  if (pass == BackwardPass::kWeight) {
    c_proj.backward(nullptr, nullptr, N, true, pass);
    c_fc.backward(nullptr, nullptr, N, false, pass);
    return;
  }
  const bool keep = pass == BackwardPass::kInput;  // the weight pass reads these later
  Arena::Mark m = arena.mark();
  if (keep) dout = arena_copy(arena, dout, NC);  // the block's running gradient: it changes after this
  float* dact = arena.allocate_array<float>(4 * NC);
  c_proj.backward(dact, dout, N, true, pass);
  kernels::bias_gelu_backward(dact, c_fc.b.grad, dact, pre, N, 4 * C);  // dact := dpre
  c_fc.backward(dx, dact, N, /*with_bias=*/false, pass);
  if (!keep) arena.rewind(m);
}

}  // namespace crucible::nn
