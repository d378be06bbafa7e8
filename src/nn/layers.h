// The GPT-2 layers, each with forward and backward side by side (llm.c style).
//
// A layer holds Param views into the model's flat parameter/gradient buffers
// and, during a step, pointers to what its forward saved for backward; those
// live in the step arena and are valid until the arena's next reset().
// Backward reads as forward in reverse. Parameter gradients accumulate (+=),
// so gradient accumulation over micro-batches is just calling backward again.
// Shapes: N = B*T rows, C channels. Not thread-safe (kernels parallelise inside).
#pragma once
#include <cstdint>

#include "core/allocator.h"
#include "nn/params.h"

namespace crucible::nn {

// out (B,T,C) = wte[tokens] + wpe[t]
struct Embedding {
  Param wte, wpe;  // (V,C), (maxT,C)
  int V = 0, C = 0;
  const int32_t* tokens = nullptr;
  void forward(float* out, const int32_t* tokens, int B, int T);
  void backward(const float* dout, int B, int T);
};

// out (N,C) = LayerNorm(a + b) ; when b is given, the residual sum is
// written to resid (N,C) and is this layer's saved input.
struct LayerNorm {
  Param w, b;  // (C), (C)
  int C = 0;
  const float* x = nullptr;  // saved input (N,C)
  float* mean = nullptr;     // (N)
  float* rstd = nullptr;     // (N)
  void forward(Arena& arena, float* out, float* resid, const float* a, const float* b, int N);
  // dx (N,C) += ; accumulating is the residual fusion.
  void backward(float* dx, const float* dout, int N);
};

// y (N,out) = x (N,in) @ W (in,out) + bias (Conv1D layout, as Hugging Face GPT-2).
struct Linear {
  Param w, b;
  int in = 0, out = 0;
  const float* x = nullptr;  // saved input (N,in)
  // with_bias=false leaves the bias to a fused consumer (bias+GELU).
  void forward(float* y, const float* x, int N, bool with_bias = true);
  // dx (N,in) = dy W^T (overwrites; may be null), dW += x^T dy, db += colsum(dy).
  void backward(float* dx, const float* dy, int N, bool with_bias = true);
};

// qkv = c_attn(x); y = attention(qkv); out = c_proj(y)
struct CausalSelfAttention {
  Linear c_attn, c_proj;
  int C = 0, NH = 0;
  float* qkv = nullptr;  // (B,T,3C)
  float* y = nullptr;    // (B,T,C)
  float* lse = nullptr;  // (B,NH,T)
  void forward(Arena& arena, float* out, const float* x, int B, int T);
  // dx (B,T,C) = ... (overwrites); scratch from the arena.
  void backward(Arena& arena, float* dx, const float* dout, int B, int T);
};

// out = c_proj(gelu(c_fc(x)))
struct MLP {
  Linear c_fc, c_proj;
  int C = 0;
  float* pre = nullptr;  // (N,4C) pre-activation
  float* act = nullptr;  // (N,4C)
  void forward(Arena& arena, float* out, const float* x, int N);
  void backward(Arena& arena, float* dx, const float* dout, int N);
};

// Pre-LN transformer block. The residual adds are fused into the LayerNorms:
//   r_mid = r + attn(ln_1(r)) is formed by ln_2's forward, and
//   r_next = r_mid + mlp(ln_2(r_mid)) is left to the caller (the next block's
//   ln_1 or the final ln_f), which receives (r_mid, mlp_out) as (a, b).
struct Block {
  LayerNorm ln_1, ln_2;
  CausalSelfAttention attn;
  MLP mlp;
  int C = 0;
  float* r_mid = nullptr;  // (N,C)
  // r_a + r_b is this block's input residual (r_b may be null).
  // On return: *out_a = r_mid, *out_b = mlp output, to be summed by the caller.
  void forward(Arena& arena, const float* r_a, const float* r_b, float** out_a, float** out_b,
               int B, int T);
  // dr (N,C): on entry the gradient w.r.t. r_next; on exit w.r.t. this block's input.
  void backward(Arena& arena, float* dr, int B, int T);
};

}  // namespace crucible::nn
