#include "kernels/kernels.h"
#include "nn/layers.h"

namespace crucible::nn {

// a, b (N,C) -> resid = a + b (when b), out (N,C) = LN(a + b), out of act_type
void LayerNorm::forward(Arena& arena, void* out, float* resid, const float* a, const float* b,
                        int N) {
  mean = arena.allocate_array<float>(N);
  rstd = arena.allocate_array<float>(N);
  x = b ? resid : a;
  if (act_type == DType::bf16)
    kernels::residual_layernorm_forward_bf16(b ? resid : nullptr, static_cast<bf16*>(out), mean, rstd,
                                             a, b, w.value, this->b.value, N, C);
  else
    kernels::residual_layernorm_forward(b ? resid : nullptr, static_cast<float*>(out), mean, rstd, a,
                                        b, w.value, this->b.value, N, C);
}

// dout (N,C) -> dx (N,C) +=, dw +=, db +=
void LayerNorm::backward(float* dx, const float* dout, int N) {
  kernels::layernorm_backward(dx, w.grad, b.grad, dout, x, w.value, mean, rstd, N, C);
}

}  // namespace crucible::nn
