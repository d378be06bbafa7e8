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
void CausalSelfAttention::backward(Arena& arena, float* dx, const float* dout, int B, int T,
                                   BackwardPass pass) {
  const int N = B * T;
  const size_t NC = size_t(N) * C;
  if (pass == BackwardPass::kWeight) {
    c_proj.backward(nullptr, nullptr, N, true, pass);
    c_attn.backward(nullptr, nullptr, N, true, pass);
    return;
  }
  const bool keep = pass == BackwardPass::kInput;  // the weight pass reads these later
  Arena::Mark m = arena.mark();
  if (keep) dout = arena_copy(arena, dout, NC);  // the block's running gradient: it changes after this
  float* dy = arena.allocate_array<float>(NC);
  float* dqkv = arena.allocate_array<float>(3 * NC);
  c_proj.backward(dy, dout, N, true, pass);
  kernels::attention_backward(dqkv, dy, qkv, y, lse, B, T, C, NH);
  c_attn.backward(dx, dqkv, N, true, pass);
  if (!keep) arena.rewind(m);
}

}  // namespace crucible::nn
