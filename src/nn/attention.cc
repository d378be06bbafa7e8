#include "kernels/kernels.h"
#include "nn/layers.h"

namespace crucible::nn {

// x (B,T,C) -> qkv (B,T,3Ch) -> y (B,T,Ch) -> out (B,T,C); sequence parallel:
// x and out are (B*T/tp, C) rows (nn/tensor_parallel.h).
void CausalSelfAttention::forward(Arena& arena, float* out, const float* x, int B, int T) {
  const int N = B * T, Ch = c_proj.in;
  qkv = arena.allocate_array<float>(size_t(N) * 3 * Ch);
  y = arena.allocate_array<float>(size_t(N) * Ch);
  lse = arena.allocate_array<float>(size_t(B) * NH * T);
  tp.first_forward(arena, c_attn, qkv, x, N, true);
  kernels::attention_forward(y, lse, qkv, B, T, Ch, NH);
  tp.last_forward(arena, c_proj, out, y, N);
}

// dout (B,T,C) -> dx (B,T,C); sequence parallel: (B*T/tp, C) rows of each.
void CausalSelfAttention::backward(Arena& arena, float* dx, const float* dout, int B, int T,
                                   BackwardPass pass) {
  const int N = B * T, Ch = c_proj.in;
  const size_t NCh = size_t(N) * Ch;
  if (pass == BackwardPass::kWeight) {
    c_proj.backward(nullptr, nullptr, N, true, pass);
    tp.first_backward(arena, c_attn, nullptr, nullptr, N, true, pass);
    return;
  }
  const bool keep = pass == BackwardPass::kInput;  // the weight pass reads these later
  Arena::Mark m = arena.mark();
  dout = tp.output_grad(arena, dout, N, keep);
  float* dy = arena.allocate_array<float>(NCh);
  float* dqkv = arena.allocate_array<float>(3 * NCh);
  c_proj.backward(dy, dout, N, true, pass);
  kernels::attention_backward(dqkv, dy, qkv, y, lse, B, T, Ch, NH);
  tp.first_backward(arena, c_attn, dx, dqkv, N, true, pass);
  if (!keep) arena.rewind(m);
}

}  // namespace crucible::nn
