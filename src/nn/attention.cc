#include "kernels/kernels.h"
#include "nn/layers.h"

namespace crucible::nn {

// x (B,T,C) -> qkv (B,T,3Ch) -> y (B,T,Ch) -> out (B,T,C)
void CausalSelfAttention::forward(Arena& arena, float* out, const float* x, int B, int T) {
  const int N = B * T, Ch = c_proj.in;
  qkv = arena.allocate_array<float>(size_t(N) * 3 * Ch);
  y = arena.allocate_array<float>(size_t(N) * Ch);
  lse = arena.allocate_array<float>(size_t(B) * NH * T);
  c_attn.forward(qkv, x, N);
  kernels::attention_forward(y, lse, qkv, B, T, Ch, NH);
  // Row-parallel: each rank's product is a partial sum; the first adds the bias.
  c_proj.forward(out, y, N, /*with_bias=*/!tp || tp->rank() == 0);
  if (tp) tp->allreduce(out, size_t(N) * C);
}

// dout (B,T,C) -> dx (B,T,C)
void CausalSelfAttention::backward(Arena& arena, float* dx, const float* dout, int B, int T,
                                   BackwardPass pass) {
  const int N = B * T, Ch = c_proj.in;
  const size_t NC = size_t(N) * C, NCh = size_t(N) * Ch;
  if (pass == BackwardPass::kWeight) {
    c_proj.backward(nullptr, nullptr, N, true, pass);
    c_attn.backward(nullptr, nullptr, N, true, pass);
    return;
  }
  const bool keep = pass == BackwardPass::kInput;  // the weight pass reads these later
  Arena::Mark m = arena.mark();
  if (keep) dout = arena_copy(arena, dout, NC);  // the block's running gradient: it changes after this
  float* dy = arena.allocate_array<float>(NCh);
  float* dqkv = arena.allocate_array<float>(3 * NCh);
  c_proj.backward(dy, dout, N, true, pass);
  kernels::attention_backward(dqkv, dy, qkv, y, lse, B, T, Ch, NH);
  c_attn.backward(dx, dqkv, N, true, pass);
  if (tp) tp->allreduce(dx, NC);  // column-parallel: each rank's dx is its heads' share
  if (!keep) arena.rewind(m);
}

}  // namespace crucible::nn
