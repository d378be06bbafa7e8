#include "kernels/kernels.h"
#include "nn/layers.h"

namespace crucible::nn {

// x (B,T,C) -> qkv (B,T,3Ch) -> y (B,T,Ch) -> out (B,T,C); sequence parallel:
// x and out are (B*T/tp, C) rows (nn/tensor_parallel.h). x, qkv, y of act_type.
void CausalSelfAttention::forward(Arena& arena, float* out, const void* x, int B, int T) {
  const int N = B * T;
  qkv = arena_act(arena, size_t(N) * 3 * c_proj.in, act_type);
  lse = arena.allocate_array<float>(size_t(B) * NH * T);
  tp.first_forward(arena, c_attn, qkv, x, N, true);
  Arena::Mark m = arena.mark();
  core(arena, B, T);
  tp.last_forward(arena, c_proj, out, y, N);
  if (recompute) arena.rewind(m);  // y is made again by backward
}

// y (B,T,Ch) = attention(qkv), y from the arena; lse written (the same bits
// when it runs again).
void CausalSelfAttention::core(Arena& arena, int B, int T) {
  const int N = B * T, Ch = c_proj.in;
  y = arena_act(arena, size_t(N) * Ch, act_type);
  if (act_type == DType::bf16)
    kernels::attention_forward_bf16(static_cast<bf16*>(y), lse, static_cast<const bf16*>(qkv), B, T, Ch, NH);
  else
    kernels::attention_forward(static_cast<float*>(y), lse, static_cast<const float*>(qkv), B, T, Ch, NH);
  c_proj.x = y;
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
  if (recompute) core(arena, B, T);
  const void* dproj = tp.output_grad(arena, c_proj, dout, N, keep);
  float* dy = arena.allocate_array<float>(NCh);
  void* dqkv = arena_act(arena, 3 * NCh, act_type);
  c_proj.backward(dy, dproj, N, true, pass);
  if (act_type == DType::bf16)
    kernels::attention_backward_bf16(static_cast<bf16*>(dqkv), dy, static_cast<const bf16*>(qkv),
                                     static_cast<const bf16*>(y), lse, B, T, Ch, NH);
  else
    kernels::attention_backward(static_cast<float*>(dqkv), dy, static_cast<const float*>(qkv),
                                static_cast<const float*>(y), lse, B, T, Ch, NH);
  tp.first_backward(arena, c_attn, dx, dqkv, N, true, pass);
  if (!keep) arena.rewind(m);
}

}  // namespace crucible::nn
