// The bf16 variants' references: widen every bf16 input (exact), run the f32
// reference (double inside), round every bf16 output once. So a fast bf16
// kernel may differ from these by the f32 kernel's error plus one rounding
// of a value that differs in its last f32 bits: at most one bf16 ulp (2^-7
// relative at the bottom of a binade) on top of the f32 tolerance
// (tests/kernels/bf16_kernels_test.cc). One exception: attention's dQ and
// dK. The fast backward forms D_i = dO_i . out_i from the stored (bf16)
// out, as it must, while ref::attention_backward computes D exactly from
// the probabilities; the difference is the rounding of out carried through
// D (~1e-3 absolute at hs 64), and the test checks dQ, dK against an oracle
// that reads the stored out.
#include <vector>

#include "kernels/reference.h"

namespace crucible::kernels::ref {
namespace {
std::vector<float> widen(const bf16* x, size_t n) {
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = to_f32(x[i]);
  return out;
}
void narrow(bf16* out, const float* x, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = to_bf16(x[i]);
}
}  // namespace

void residual_layernorm_forward_bf16(float* resid_out, bf16* out, float* mean, float* rstd,
                                     const float* a, const float* b, const float* w,
                                     const float* bias, int N, int C) {
  std::vector<float> o(size_t(N) * C);
  residual_layernorm_forward(resid_out, o.data(), mean, rstd, a, b, w, bias, N, C);
  narrow(out, o.data(), o.size());
}

void bias_gelu_forward_bf16(bf16* out, bf16* pre, const float* bias, int N, int C) {
  const size_t n = size_t(N) * C;
  std::vector<float> p = widen(pre, n), o(n), zero(size_t(C), 0.0f);
  // pre + bias is rounded to bf16 first: gelu reads the pre-activation that
  // backward will see.
  for (size_t i = 0; i < n; ++i) p[i] = to_f32(to_bf16(p[i] + (bias ? bias[i % size_t(C)] : 0.0f)));
  bias_gelu_forward(o.data(), p.data(), zero.data(), N, C);
  narrow(pre, p.data(), n);
  narrow(out, o.data(), n);
}

void bias_gelu_backward_bf16(bf16* dpre, float* dbias, const float* dout, const bf16* pre, int N,
                             int C) {
  const size_t n = size_t(N) * C;
  std::vector<float> p = widen(pre, n), d(n);
  bias_gelu_backward(d.data(), dbias, dout, p.data(), N, C);
  narrow(dpre, d.data(), n);
}

void attention_forward_bf16(bf16* out, float* lse, const bf16* qkv, int B, int T, int C, int NH) {
  std::vector<float> q = widen(qkv, size_t(B) * T * 3 * C), o(size_t(B) * T * C);
  attention_forward(o.data(), lse, q.data(), B, T, C, NH);
  narrow(out, o.data(), o.size());
}

void attention_backward_bf16(bf16* dqkv, const float* dout, const bf16* qkv, const bf16* out,
                             const float* lse, int B, int T, int C, int NH) {
  const size_t n = size_t(B) * T * C;
  std::vector<float> q = widen(qkv, 3 * n), o = widen(out, n), dq(3 * n);
  attention_backward(dq.data(), dout, q.data(), o.data(), lse, B, T, C, NH);
  narrow(dqkv, dq.data(), dq.size());
}

void softmax_cross_entropy_bf16(float* losses, bf16* logits, const int32_t* targets, int N, int V,
                                float dscale) {
  std::vector<float> x = widen(logits, size_t(N) * V);
  softmax_cross_entropy(losses, x.data(), targets, N, V, dscale);
  if (dscale != 0.0f) narrow(logits, x.data(), x.size());
}

void logsumexp_rows_bf16(float* max, float* log_sum, const bf16* logits, int N, int V) {
  std::vector<float> x = widen(logits, size_t(N) * V);
  logsumexp_rows(max, log_sum, x.data(), N, V);
}

void softmax_xent_backward_bf16(bf16* logits, const float* max, const float* log_sum,
                                const int32_t* targets, int offset, int N, int V, float dscale) {
  std::vector<float> x = widen(logits, size_t(N) * V);
  softmax_xent_backward(x.data(), max, log_sum, targets, offset, N, V, dscale);
  narrow(logits, x.data(), x.size());
}

void convert_to_bf16(bf16* out, const float* in, size_t n) { narrow(out, in, n); }

void convert_to_f32(float* out, const bf16* in, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = to_f32(in[i]);
}

void sum_bf16_pieces(float* sum, bf16* rounded, const bf16* pieces, int W, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    float s = 0.0f;
    for (int q = 0; q < W; ++q) s += to_f32(pieces[size_t(q) * n + i]);
    if (rounded) {
      rounded[i] = to_bf16(s);
      s = to_f32(rounded[i]);
    }
    sum[i] = s;
  }
}

void adamw_bf16_moments(float* p, bf16* p_bf16, const float* g, bf16* m, bf16* v, size_t n,
                        const StepScalars* s, float beta1, float beta2, float eps, float weight_decay) {
  std::vector<float> mf = widen(m, n), vf = widen(v, n);
  adamw(p, p_bf16, g, mf.data(), vf.data(), n, s, beta1, beta2, eps, weight_decay);
  narrow(m, mf.data(), n);
  narrow(v, vf.data(), n);
}

}  // namespace crucible::kernels::ref
