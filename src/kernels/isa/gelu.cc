// Bias + GELU (tanh approximation), forward and backward (contracts in
// signatures.inc). Compiled once per ISA.
//
//   gelu(x)  = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3)
//   gelu'(x) = 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) sqrt(2/pi) (1 + 3 0.044715 x^2)
//
// Both are elementwise over rows; dbias is a sum over rows, made independent
// of the thread count the same way as layernorm's dw: fixed blocks of
// kBlockRows rows, each summed into a per-thread stack buffer, then added into
// dbias in block order (omp ordered).
#include <algorithm>

#include "core/check.h"
#include "kernels/isa/isa.h"
#include "kernels/isa/vec.h"

namespace crucible::kernels::CRUCIBLE_ISA {
namespace {

constexpr float kS = 0.7978845608028654f;  // sqrt(2/pi)
constexpr float kA = 0.044715f;
constexpr int kBlockRows = 8;
constexpr int kMaxC = 16384;  // bound of the per-thread dbias partial (64 KB of stack)

inline vf gelu(vf x) { return 0.5f * x * (1.0f + vtanh(kS * (x + kA * x * x * x))); }

inline vf gelu_grad(vf x) {
  vf th = vtanh(kS * (x + kA * x * x * x));
  vf du = kS * (1.0f + (3.0f * kA) * x * x);
  return 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * du;
}

// pre (N,C) += bias (C) ; out (N,C) = gelu(pre). E: float or bf16 (pre is
// rounded before gelu reads it, so backward sees the forward's input); a
// null bias leaves pre alone (the GEMM added it).
template <typename E>
void gelu_forward(E* out, E* pre, const float* bias, int N, int C) {
  int r = C % kW;
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    E* p = pre + size_t(n) * C;
    E* o = out + size_t(n) * C;
    int c = 0;
    for (; c + kW <= C; c += kW) {
      vf x = load(p + c);
      if (bias) {
        x += load(bias + c);
        store(p + c, x);
        if constexpr (sizeof(E) == 2) x = load(p + c);
      }
      store(o + c, gelu(x));
    }
    if (r) {
      vf x = load_partial(p + c, r);
      if (bias) {
        x += load_partial(bias + c, r);
        store_partial(p + c, x, r);
        if constexpr (sizeof(E) == 2) x = load_partial(p + c, r);
      }
      store_partial(o + c, gelu(x), r);
    }
  }
}

// dpre (N,C) = dout (N,C) * gelu'(pre (N,C)) ; dbias (C) += column sums of dpre.
// dpre may alias dout (f32): each element is read before it is written.
template <typename E>
void gelu_backward(E* dpre, float* dbias, const float* dout, const E* pre, int N, int C) {
  CRUCIBLE_CHECK(C <= kMaxC, "[bias_gelu_backward] C exceeds the per-thread partial buffer");
  int r = C % kW, blocks = (N + kBlockRows - 1) / kBlockRows;
#pragma omp parallel
  {
    float pb[kMaxC];  // this block's share of dbias: (C)
#pragma omp for ordered schedule(static, 1)
    for (int blk = 0; blk < blocks; ++blk) {
      std::fill(pb, pb + C, 0.0f);
      int n_end = std::min(N, (blk + 1) * kBlockRows);
      for (int n = blk * kBlockRows; n < n_end; ++n) {
        size_t off = size_t(n) * C;
        int c = 0;
        for (; c + kW <= C; c += kW) {
          vf d = load(dout + off + c) * gelu_grad(load(pre + off + c));
          store(dpre + off + c, d);  // dbias sums the f32 values
          store(pb + c, load(pb + c) + d);
        }
        if (r) {
          vf d = load_partial(dout + off + c, r) * gelu_grad(load_partial(pre + off + c, r));
          store_partial(dpre + off + c, d, r);
          store_partial(pb + c, load_partial(pb + c, r) + d, r);
        }
      }
#pragma omp ordered
      {
        int c = 0;
        for (; c + kW <= C; c += kW) store(dbias + c, load(dbias + c) + load(pb + c));
        if (r) store_partial(dbias + c, load_partial(dbias + c, r) + load_partial(pb + c, r), r);
      }
    }
  }
}

}  // namespace

void bias_gelu_forward(float* out, float* pre, const float* bias, int N, int C) {
  gelu_forward(out, pre, bias, N, C);
}
void bias_gelu_forward_bf16(bf16* out, bf16* pre, const float* bias, int N, int C) {
  gelu_forward(out, pre, bias, N, C);
}
void bias_gelu_backward(float* dpre, float* dbias, const float* dout, const float* pre, int N,
                        int C) {
  gelu_backward(dpre, dbias, dout, pre, N, C);
}
void bias_gelu_backward_bf16(bf16* dpre, float* dbias, const float* dout, const bf16* pre, int N,
                             int C) {
  gelu_backward(dpre, dbias, dout, pre, N, C);
}

}  // namespace crucible::kernels::CRUCIBLE_ISA
