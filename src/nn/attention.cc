#include "kernels/kernels.h"
#include "nn/layers.h"

namespace crucible::nn {

// x (B,T,C) -> qkv (B,T,3C) -> y (B,T,C) -> out (B,T,C)
void CausalSelfAttention::forward(Arena& arena, float* out, const float* x, int B, int T) {
  int N = B * T;
  qkv = arena.allocate_array<float>(size_t(N) * 3 * C);
  y = arena.allocate_array<float>(size_t(N) * C);
  lse = arena.allocate_array<float>(size_t(B) * NH * T);
  c_attn.forward(qkv, x, N);
  kernels::attention_forward(y, lse, qkv, B, T, C, NH);
  c_proj.forward(out, y, N);
}

// dout (B,T,C) -> dx (B,T,C)
void CausalSelfAttention::backward(Arena& arena, float* dx, const float* dout, int B, int T) {
  int N = B * T;
  Arena::Mark m = arena.mark();
  float* dy = arena.allocate_array<float>(size_t(N) * C);
  float* dqkv = arena.allocate_array<float>(size_t(N) * 3 * C);
  c_proj.backward(dy, dout, N);
  kernels::attention_backward(dqkv, dy, qkv, y, lse, B, T, C, NH);
  c_attn.backward(dx, dqkv, N);
  arena.rewind(m);
}

}  // namespace crucible::nn
