// Cost models of the fused kernels: the FLOPs each call performs and the
// bytes it moves to and from memory, at the level a roofline needs (which
// side of the ridge a kernel sits on), counted from the shapes alone. Each
// function takes the kernel's own arguments (signatures.inc) so the timing
// wrappers in kernels.h can call it with the same pack. Counts, per element
// of the (N, C) activations (f32, 4 bytes):
//   embedding     fwd: 1 add, reads 2 rows, writes 1       bwd: 2 adds, 5 touches
//   layernorm     fwd: ~8 FLOPs (residual add, mean, var, normalise, affine),
//                 reads a, b, writes resid, out             bwd: ~10, 3 touches
//   gelu (tanh)   fwd: ~10 FLOPs, reads x, writes pre, out  bwd: ~15, 3 touches
//   attention     causal, per (B, head): QK^T and PV are T^2/2 x hs MACs each:
//                 fwd 2 B T^2 C FLOPs; bwd recomputes QK^T and does 4 more
//                 products: 5 B T^2 C. Traffic: qkv in, out (+lse) out; bwd
//                 also dout, out in and dqkv out (tiles stay in cache).
//   cross-entropy ~5 FLOPs per logit (max, exp, sum, normalise, gradient),
//                 reads and writes the logits (gradient in place)
//   adamw         ~15 FLOPs per parameter, reads p, g, m, v, writes p, m, v
//   add_sum_squares, add_mean  2 and 1 FLOPs per element, read x
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "kernels/step_scalars.h"

namespace crucible::kernels::cost {

struct Cost {
  double flops = 0, bytes = 0;
};

inline Cost embedding_forward(float*, const int32_t*, const float*, const float*, int B, int T,
                              int C) {
  const double n = double(B) * T * C;
  return {n, 3 * 4 * n};
}
// Each gradient it adds to (dwte, dwpe): n additions, its floats read and
// written; dout read once.
inline Cost embedding_backward(float* dwte, float* dwpe, const float*, const int32_t*, int64_t, int64_t, int B,
                               int T, int C) {
  const double n = double(B) * T * C, parts = (dwte ? 1 : 0) + (dwpe ? 1 : 0);
  return {parts * n, (1 + 2 * parts) * 4 * n};
}
inline Cost embedding_lookup(float*, const int32_t*, const float*, int64_t, int64_t, int N, int C) {
  return {0, 2 * 4 * double(N) * C};
}
inline Cost add_positions(float*, const float*, int, int N, int, int C) {
  const double n = double(N) * C;
  return {n, 3 * 4 * n};
}
inline Cost residual_layernorm_forward(float*, float*, float*, float*, const float*, const float*,
                                       const float*, const float*, int N, int C) {
  const double n = double(N) * C;
  return {8 * n, 4 * 4 * n};
}
inline Cost layernorm_backward(float*, float*, float*, const float*, const float*, const float*,
                               const float*, const float*, int N, int C) {
  const double n = double(N) * C;
  return {10 * n, 3 * 4 * n};
}
inline Cost bias_gelu_forward(float*, float*, const float*, int N, int C) {
  const double n = double(N) * C;
  return {10 * n, 3 * 4 * n};
}
inline Cost bias_gelu_backward(float*, float*, const float*, const float*, int N, int C) {
  const double n = double(N) * C;
  return {15 * n, 3 * 4 * n};
}
inline Cost attention_forward(float*, float*, const float*, int B, int T, int C, int) {
  const double btc = double(B) * T * C;
  return {2 * btc * T, 4 * 4 * btc};
}
inline Cost attention_backward(float*, const float*, const float*, const float*, const float*,
                               int B, int T, int C, int) {
  const double btc = double(B) * T * C;
  return {5 * btc * T, 8 * 4 * btc};
}
// Each row reads its keys and values once: 4 FLOPs per (key, channel).
inline Cost attention_paged(float*, const float*, int, const float*, size_t, int, const int32_t* const*,
                            const int32_t* pos, int R, int C, int) {
  double keys = 0;
  for (int r = 0; r < R; ++r) keys += pos[r] + 1;
  return {4 * keys * C, 4 * (2 * keys * C + 2.0 * R * C)};
}
inline Cost softmax_cross_entropy(float*, float*, const int32_t*, int N, int V, float) {
  const double n = double(N) * V;
  return {5 * n, 2 * 4 * n};
}
inline Cost logsumexp_rows(float*, float*, const float*, int N, int V) {
  const double n = double(N) * V;
  return {3 * n, 4 * n};
}
inline Cost softmax_xent_backward(float*, const float*, const float*, const int32_t*, int, int N,
                                  int V, float) {
  const double n = double(N) * V;
  return {3 * n, 2 * 4 * n};
}
inline Cost adamw_scalars(StepScalars*, float, float, float) { return {0, 0}; }
inline Cost adamw(float*, bf16* p_bf16, const float*, float*, float*, size_t n, const StepScalars*,
                  float, float, float, float) {
  return {15.0 * double(n), (7 * 4.0 + (p_bf16 ? 2 : 0)) * double(n)};
}
inline Cost adamw_bf16_moments(float*, bf16* p_bf16, const float*, bf16*, bf16*, size_t n,
                               const StepScalars*, float, float, float, float) {
  return {15.0 * double(n), (3 * 4.0 + 4 * 2.0 + (p_bf16 ? 2 : 0)) * double(n)};
}
inline Cost add_sum_squares(double*, const float*, size_t n) { return {2.0 * double(n), 4.0 * double(n)}; }
inline Cost add(float*, const float*, const float*, size_t n) { return {double(n), 12.0 * double(n)}; }
inline Cost fill(float*, size_t n, float) { return {0, 4.0 * double(n)}; }
inline Cost copy_bytes(void*, const void*, size_t bytes) { return {0, 2.0 * double(bytes)}; }
inline Cost add_mean(double*, const float*, size_t n) { return {double(n), 4.0 * double(n)}; }
inline Cost target_logits(float*, const float*, const int32_t*, int64_t, int64_t, int N) {
  return {0, 12.0 * N};
}
inline Cost target_logits_bf16(float*, const bf16*, const int32_t*, int64_t, int64_t, int N) {
  return {0, 10.0 * N};
}
inline Cost combine_vocab_stats(float*, float*, float*, const float*, const int32_t*, int R, int N) {
  return {6.0 * R * N, 4.0 * (3.0 * R * N + 4.0 * N)};
}

// bf16 variants: the f32 counts with the bf16 tensors at 2 bytes.
inline Cost residual_layernorm_forward_bf16(float*, bf16*, float*, float*, const float*,
                                            const float*, const float*, const float*, int N, int C) {
  const double n = double(N) * C;
  return {8 * n, (3 * 4 + 2) * n};
}
inline Cost bias_gelu_forward_bf16(bf16*, bf16*, const float* bias, int N, int C) {
  const double n = double(N) * C;
  return {10 * n, (bias ? 3 : 2) * 2 * n};
}
inline Cost bias_gelu_backward_bf16(bf16*, float*, const float*, const bf16*, int N, int C) {
  const double n = double(N) * C;
  return {15 * n, (4 + 2 + 2) * n};
}
inline Cost attention_forward_bf16(bf16*, float*, const bf16*, int B, int T, int C, int) {
  const double btc = double(B) * T * C;
  return {2 * btc * T, 4 * 2 * btc};
}
inline Cost attention_backward_bf16(bf16*, const float*, const bf16*, const bf16*, const float*,
                                    int B, int T, int C, int) {
  const double btc = double(B) * T * C;
  return {5 * btc * T, (4 + 7 * 2) * btc};
}
inline Cost softmax_cross_entropy_bf16(float*, bf16*, const int32_t*, int N, int V, float) {
  const double n = double(N) * V;
  return {5 * n, 2 * 2 * n};
}
inline Cost logsumexp_rows_bf16(float*, float*, const bf16*, int N, int V) {
  const double n = double(N) * V;
  return {3 * n, 2 * n};
}
inline Cost softmax_xent_backward_bf16(bf16*, const float*, const float*, const int32_t*, int,
                                       int N, int V, float) {
  const double n = double(N) * V;
  return {3 * n, 2 * 2 * n};
}
inline Cost convert_to_bf16(bf16*, const float*, size_t n) { return {0, 6.0 * double(n)}; }
inline Cost convert_to_f32(float*, const bf16*, size_t n) { return {0, 6.0 * double(n)}; }
// W bf16 reads and one f32 write (and a bf16 write when rounded) per element.
inline Cost sum_bf16_pieces(float*, bf16* rounded, const bf16*, int W, size_t n) {
  return {double(W) * double(n), (2.0 * W + 4.0 + (rounded ? 2.0 : 0.0)) * double(n)};
}

}  // namespace crucible::kernels::cost
