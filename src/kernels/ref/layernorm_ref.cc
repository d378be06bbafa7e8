#include <cmath>

#include "kernels/reference.h"

namespace crucible::kernels::ref {

void residual_layernorm_forward(float* resid_out, float* out, float* mean, float* rstd,
                                const float* a, const float* b, const float* w, const float* bias,
                                int N, int C) {
  for (int n = 0; n < N; ++n) {
    const float* ra = a + size_t(n) * C;
    const float* rb = b ? b + size_t(n) * C : nullptr;
    double s = 0, ss = 0;
    for (int c = 0; c < C; ++c) s += double(ra[c]) + (rb ? rb[c] : 0.0f);
    double m = s / C;
    for (int c = 0; c < C; ++c) {
      double x = double(ra[c] + (rb ? rb[c] : 0.0f)) - m;
      ss += x * x;
    }
    double r = 1.0 / std::sqrt(ss / C + 1e-5);
    for (int c = 0; c < C; ++c) {
      float x = ra[c] + (rb ? rb[c] : 0.0f);
      if (resid_out) resid_out[size_t(n) * C + c] = x;
      out[size_t(n) * C + c] = float((x - m) * r * w[c] + bias[c]);
    }
    mean[n] = float(m);
    rstd[n] = float(r);
  }
}

void layernorm_backward(float* dx, float* dw, float* dbias, const float* dout, const float* x,
                        const float* w, const float* mean, const float* rstd, int N, int C) {
  for (int n = 0; n < N; ++n) {
    const float* d = dout + size_t(n) * C;
    const float* xr = x + size_t(n) * C;
    double dnorm_mean = 0, dnorm_norm_mean = 0;
    for (int c = 0; c < C; ++c) {
      double norm = (double(xr[c]) - mean[n]) * rstd[n];
      double dnorm = double(d[c]) * w[c];
      dnorm_mean += dnorm;
      dnorm_norm_mean += dnorm * norm;
    }
    dnorm_mean /= C;
    dnorm_norm_mean /= C;
    for (int c = 0; c < C; ++c) {
      double norm = (double(xr[c]) - mean[n]) * rstd[n];
      double dnorm = double(d[c]) * w[c];
      dbias[c] += d[c];
      dw[c] += float(norm * d[c]);
      dx[size_t(n) * C + c] += float((dnorm - dnorm_mean - norm * dnorm_norm_mean) * rstd[n]);
    }
  }
}

}  // namespace crucible::kernels::ref
