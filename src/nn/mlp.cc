#include "kernels/kernels.h"
#include "nn/layers.h"

namespace crucible::nn {

// x (N,C) -> pre (N,H) = x W_fc ; act = gelu(pre + b_fc) ; out (N,C) = act W_proj + b_proj;
// sequence parallel: x and out are (N/tp, C) rows (as CausalSelfAttention).
void MLP::forward(Arena& arena, float* out, const float* x, int N) {
  const int H = c_fc.out;
  pre = arena.allocate_array<float>(size_t(N) * H);
  act = arena.allocate_array<float>(size_t(N) * H);
  tp.first_forward(arena, c_fc, pre, x, N, /*with_bias=*/false);
  kernels::bias_gelu_forward(act, pre, c_fc.b.value, N, H);
  tp.last_forward(arena, c_proj, out, act, N);
}

// dout (N,C) -> dx (N,C); sequence parallel: (N/tp, C) rows of each.
void MLP::backward(Arena& arena, float* dx, const float* dout, int N, BackwardPass pass) {
  const int H = c_fc.out;
  if (pass == BackwardPass::kWeight) {
    c_proj.backward(nullptr, nullptr, N, true, pass);
    tp.first_backward(arena, c_fc, nullptr, nullptr, N, false, pass);
    return;
  }
  const bool keep = pass == BackwardPass::kInput;  // the weight pass reads these later
  Arena::Mark m = arena.mark();
  dout = tp.output_grad(arena, dout, N, keep);
  float* dact = arena.allocate_array<float>(size_t(N) * H);
  c_proj.backward(dact, dout, N, true, pass);
  kernels::bias_gelu_backward(dact, c_fc.b.grad, dact, pre, N, H);  // dact := dpre
  tp.first_backward(arena, c_fc, dx, dact, N, /*with_bias=*/false, pass);
  if (!keep) arena.rewind(m);
}

}  // namespace crucible::nn
