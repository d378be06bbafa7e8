#include "support/attention_bounds.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace crucible::testing {

namespace {

// Row t of head h's causal softmax, in double: p[j] = P_tj for j <= t.
//   qkv (B,T,3C)
struct SoftmaxRows {
  const std::vector<float>& qkv;
  int T, C, hs;
  double scale;
  SoftmaxRows(const std::vector<float>& qkv_, int T_, int C_, int NH)
      : qkv(qkv_), T(T_), C(C_), hs(C_ / NH), scale(1.0 / std::sqrt(double(C_ / NH))) {}
  // Where part (0 q, 1 k, 2 v) of head h starts in row (b, t).
  size_t at(int b, int t, int part, int h) const {
    return (size_t(b) * T + t) * 3 * C + part * C + h * hs;
  }
  void probs(int b, int h, int t, std::vector<double>& p) const {
    const float* q = &qkv[at(b, t, 0, h)];
    double mx = -INFINITY, sum = 0;
    for (int j = 0; j <= t; ++j) {
      double sc = 0;
      for (int c = 0; c < hs; ++c) sc += double(q[c]) * qkv[at(b, j, 1, h) + c];
      mx = std::max(mx, p[j] = sc * scale);
    }
    for (int j = 0; j <= t; ++j) sum += (p[j] = std::exp(p[j] - mx));
    for (int j = 0; j <= t; ++j) p[j] /= sum;
  }
};

}  // namespace

std::vector<float> attention_backward_reading_out(const std::vector<float>& dout,
                                                  const std::vector<float>& qkv,
                                                  const std::vector<float>& out, int B, int T,
                                                  int C, int NH) {
  const SoftmaxRows sm(qkv, T, C, NH);
  const int hs = sm.hs;
  std::vector<double> d(qkv.size(), 0.0), p(T);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < NH; ++h)
      for (int t = 0; t < T; ++t) {
        const float* q = &qkv[sm.at(b, t, 0, h)];
        const float* dO = &dout[(size_t(b) * T + t) * C + h * hs];
        const float* O = &out[(size_t(b) * T + t) * C + h * hs];
        sm.probs(b, h, t, p);
        double D = 0;
        for (int c = 0; c < hs; ++c) D += double(dO[c]) * O[c];
        for (int j = 0; j <= t; ++j) {
          const double P = p[j];
          double dP = 0;
          for (int c = 0; c < hs; ++c) dP += double(dO[c]) * qkv[sm.at(b, j, 2, h) + c];
          const double dS = P * (dP - D) * sm.scale;
          for (int c = 0; c < hs; ++c) {
            d[sm.at(b, t, 0, h) + c] += dS * qkv[sm.at(b, j, 1, h) + c];
            d[sm.at(b, j, 1, h) + c] += dS * q[c];
            d[sm.at(b, j, 2, h) + c] += P * dO[c];
          }
        }
      }
  return std::vector<float>(d.begin(), d.end());
}

DotBounds dot_bounds(const std::vector<float>& qkv, const std::vector<float>& dout,
                     const std::vector<float>& out_stored, int B, int T, int C, int NH) {
  const SoftmaxRows sm(qkv, T, C, NH);
  const int hs = sm.hs;
  const double u = std::ldexp(1.0, -8), scale = sm.scale;
  DotBounds bd{std::vector<double>(size_t(B) * T * C, 0.0),
               std::vector<double>(size_t(B) * T * 3 * C, 0.0)};
  std::vector<double> p(T);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < NH; ++h)
      for (int t = 0; t < T; ++t) {
        const size_t row = (size_t(b) * T + t) * C + h * hs;
        const float* q = &qkv[sm.at(b, t, 0, h)];
        const float* dO = &dout[row];
        const float* O = &out_stored[row];
        sm.probs(b, h, t, p);
        double D = 0;
        for (int c = 0; c < hs; ++c) D += double(dO[c]) * O[c];
        for (int j = 0; j <= t; ++j) {
          const double P = p[j];
          const float* v = &qkv[sm.at(b, j, 2, h)];
          double dP = 0, spread = 0;
          for (int c = 0; c < hs; ++c) {
            dP += double(dO[c]) * v[c];
            spread += std::fabs(double(dO[c])) * std::fabs(double(v[c]) - O[c]);
          }
          const double f = (1 + u) * u * P * spread + u * std::fabs(P * (dP - D));
          for (int c = 0; c < hs; ++c) {
            bd.out[row + c] += u * P * std::fabs(v[c]);
            bd.dqkv[sm.at(b, j, 2, h) + c] += (2 * u + u * u) * P * std::fabs(dO[c]);
            bd.dqkv[sm.at(b, j, 1, h) + c] += scale * f * std::fabs(q[c]);
            bd.dqkv[sm.at(b, t, 0, h) + c] += scale * f * std::fabs(qkv[sm.at(b, j, 1, h) + c]);
          }
        }
      }
  return bd;
}

}  // namespace crucible::testing
