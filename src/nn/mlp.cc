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
void MLP::backward(Arena& arena, float* dx, const float* dout, int N) {
  Arena::Mark m = arena.mark();
  float* dact = arena.allocate_array<float>(size_t(N) * 4 * C);
  c_proj.backward(dact, dout, N);
  kernels::bias_gelu_backward(dact, c_fc.b.grad, dact, pre, N, 4 * C);  // dact := dpre
  c_fc.backward(dx, dact, N, /*with_bias=*/false);
  arena.rewind(m);
}

}  // namespace crucible::nn
