// Residual add + LayerNorm forward, LayerNorm backward (contracts in
// signatures.inc). Compiled once per ISA.
//
// Rows are independent, so both kernels parallelise over rows; a row (C <=
// a few thousand floats) stays in L1 between the passes over it, so the
// statistics take a numerically sound two-pass form at one pass's memory cost.
//
// dw and dbias are sums over rows. For results that do not depend on the
// thread count, rows are cut into fixed blocks of kBlockRows; each block sums
// into a per-thread stack buffer and the blocks are added into dw/dbias in
// block order (omp ordered): no atomics, bit-identical for any thread count.
#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "kernels/isa/isa.h"
#include "kernels/isa/vec.h"

namespace crucible::kernels::CRUCIBLE_ISA {
namespace {

constexpr float kEps = 1e-5f;
constexpr int kBlockRows = 8;
constexpr int kMaxC = 16384;  // bound of the per-thread partial sums (2 x 64 KB of stack)

// One row of the backward. d, x, dx: (C) ; pw, pb: (C) block partials of dw, dbias.
void row_backward(float* dx, float* pw, float* pb, const float* d, const float* x, const float* w,
                  float mean, float rstd, int C) {
  // Pass 1: the two row means the input gradient needs, and the dw/dbias terms.
  vf sum_dn = splat(0.0f), sum_dn_norm = splat(0.0f);
  int c = 0;
  for (; c + kW <= C; c += kW) {
    vf dv = load(d + c), norm = (load(x + c) - mean) * rstd, dn = dv * load(w + c);
    sum_dn += dn;
    sum_dn_norm += dn * norm;
    store(pw + c, load(pw + c) + norm * dv);
    store(pb + c, load(pb + c) + dv);
  }
  int r = C - c;
  if (r) {  // padding lanes have dv = 0, so they add nothing to the sums
    vf dv = load_partial(d + c, r), norm = (load_partial(x + c, r) - mean) * rstd;
    vf dn = dv * load_partial(w + c, r);
    sum_dn += dn;
    sum_dn_norm += dn * norm;
    store_partial(pw + c, load_partial(pw + c, r) + norm * dv, r);
    store_partial(pb + c, load_partial(pb + c, r) + dv, r);
  }
  float dn_mean = hsum(sum_dn) / C, dn_norm_mean = hsum(sum_dn_norm) / C;

  // Pass 2 (row in L1): dx += (dnorm - mean(dnorm) - norm * mean(dnorm * norm)) * rstd
  for (c = 0; c + kW <= C; c += kW) {
    vf norm = (load(x + c) - mean) * rstd, dn = load(d + c) * load(w + c);
    store(dx + c, load(dx + c) + (dn - dn_mean - norm * dn_norm_mean) * rstd);
  }
  if (r) {
    vf norm = (load_partial(x + c, r) - mean) * rstd;
    vf dn = load_partial(d + c, r) * load_partial(w + c, r);
    store_partial(dx + c, load_partial(dx + c, r) + (dn - dn_mean - norm * dn_norm_mean) * rstd, r);
  }
}

// resid_out (N,C) = a + b (if non-null); out (N,C); mean, rstd (N); a, b (N,C); w, bias (C)
// O: float, or bf16 (the bf16 variant: out rounded, all else f32).
template <typename O>
void layernorm_forward(float* resid_out, O* out, float* mean, float* rstd, const float* a,
                       const float* b, const float* w, const float* bias, int N, int C) {
  CRUCIBLE_CHECK(sizeof(O) == 4 || resid_out || C <= kMaxC, "[layernorm] C exceeds the row buffer");
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const float* ra = a + size_t(n) * C;
    const float* rb = b ? b + size_t(n) * C : nullptr;
    O* o = out + size_t(n) * C;
    // x = a + b is parked in resid_out if the caller wants it, else in the
    // out row (overwritten in pass 3; a stack row when out is bf16); either
    // way it is re-read from L1.
    float row[sizeof(O) == 4 ? 1 : kMaxC];
    float* x = resid_out ? resid_out + size_t(n) * C : sizeof(O) == 4 ? reinterpret_cast<float*>(o) : row;
    int c = 0, r = C % kW;

    // Pass 1: x and its sum.
    vf sum = splat(0.0f);
    for (; c + kW <= C; c += kW) {
      vf xv = rb ? load(ra + c) + load(rb + c) : load(ra + c);
      store(x + c, xv);
      sum += xv;
    }
    if (r) {
      vf xv = load_partial(ra + c, r);
      if (rb) xv += load_partial(rb + c, r);
      store_partial(x + c, xv, r);
      sum += xv;  // padding lanes are 0
    }
    float m = hsum(sum) / C;

    // Pass 2: variance about the mean (no E[x^2] - E[x]^2 cancellation).
    vf ss = splat(0.0f);
    for (c = 0; c + kW <= C; c += kW) {
      vf dv = load(x + c) - m;
      ss += dv * dv;
    }
    if (r) {
      vf dv = load_partial(x + c, r, m) - m;  // padding lanes filled with m: 0
      ss += dv * dv;
    }
    float rs = 1.0f / std::sqrt(hsum(ss) / C + kEps);

    // Pass 3: normalise, scale, shift.
    for (c = 0; c + kW <= C; c += kW)
      store(o + c, (load(x + c) - m) * rs * load(w + c) + load(bias + c));
    if (r) {
      vf ov =
          (load_partial(x + c, r) - m) * rs * load_partial(w + c, r) + load_partial(bias + c, r);
      store_partial(o + c, ov, r);
    }
    mean[n] = m;
    rstd[n] = rs;
  }
}

}  // namespace

void residual_layernorm_forward(float* resid_out, float* out, float* mean, float* rstd,
                                const float* a, const float* b, const float* w, const float* bias,
                                int N, int C) {
  layernorm_forward(resid_out, out, mean, rstd, a, b, w, bias, N, C);
}

void residual_layernorm_forward_bf16(float* resid_out, bf16* out, float* mean, float* rstd,
                                     const float* a, const float* b, const float* w,
                                     const float* bias, int N, int C) {
  layernorm_forward(resid_out, out, mean, rstd, a, b, w, bias, N, C);
}

// dx (N,C) +=, dw (C) +=, dbias (C) += ; dout, x (N,C) ; w (C) ; mean, rstd (N)
void layernorm_backward(float* dx, float* dw, float* dbias, const float* dout, const float* x,
                        const float* w, const float* mean, const float* rstd, int N, int C) {
  CRUCIBLE_CHECK(C <= kMaxC, "[layernorm_backward] C exceeds the per-thread partial buffer");
  int blocks = (N + kBlockRows - 1) / kBlockRows;
#pragma omp parallel
  {
    float pw[kMaxC], pb[kMaxC];  // this block's share of dw, dbias: (C) each
#pragma omp for ordered schedule(static, 1)
    for (int blk = 0; blk < blocks; ++blk) {
      std::fill(pw, pw + C, 0.0f);
      std::fill(pb, pb + C, 0.0f);
      int n_end = std::min(N, (blk + 1) * kBlockRows);
      for (int n = blk * kBlockRows; n < n_end; ++n) {
        size_t off = size_t(n) * C;
        row_backward(dx + off, pw, pb, dout + off, x + off, w, mean[n], rstd[n], C);
      }
#pragma omp ordered
      {
        add_into(dw, pw, C);
        add_into(dbias, pb, C);
      }
    }
  }
}

}  // namespace crucible::kernels::CRUCIBLE_ISA
