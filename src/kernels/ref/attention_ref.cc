// Reference causal attention: materialises each score row in double.
#include <cmath>
#include <vector>

#include "kernels/reference.h"

namespace crucible::kernels::ref {

void attention_forward(float* out, float* lse, const float* qkv, int B, int T, int C, int NH) {
  int hs = C / NH;
  double scale = 1.0 / std::sqrt(double(hs));
  std::vector<double> p(T);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < NH; ++h)
      for (int t = 0; t < T; ++t) {
        const float* q = qkv + (size_t(b) * T + t) * 3 * C + h * hs;
        double mx = -INFINITY;
        for (int s = 0; s <= t; ++s) {
          const float* k = qkv + (size_t(b) * T + s) * 3 * C + C + h * hs;
          double d = 0;
          for (int i = 0; i < hs; ++i) d += double(q[i]) * k[i];
          p[s] = d * scale;
          mx = std::max(mx, p[s]);
        }
        double sum = 0;
        for (int s = 0; s <= t; ++s) sum += (p[s] = std::exp(p[s] - mx));
        lse[(size_t(b) * NH + h) * T + t] = float(mx + std::log(sum));
        float* o = out + (size_t(b) * T + t) * C + h * hs;
        for (int i = 0; i < hs; ++i) {
          double acc = 0;
          for (int s = 0; s <= t; ++s) acc += p[s] / sum * qkv[(size_t(b) * T + s) * 3 * C + 2 * C + h * hs + i];
          o[i] = float(acc);
        }
      }
}

void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* /*out*/,
                        const float* /*lse*/, int B, int T, int C, int NH) {
  int hs = C / NH;
  double scale = 1.0 / std::sqrt(double(hs));
  for (size_t i = 0; i < size_t(B) * T * 3 * C; ++i) dqkv[i] = 0;
  std::vector<double> p(T), dp(T);
  auto at = [&](int b, int t, int part, int h) { return (size_t(b) * T + t) * 3 * C + part * C + h * hs; };
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < NH; ++h)
      for (int t = 0; t < T; ++t) {
        const float* q = qkv + at(b, t, 0, h);
        double mx = -INFINITY;
        for (int s = 0; s <= t; ++s) {
          double d = 0;
          for (int i = 0; i < hs; ++i) d += double(q[i]) * qkv[at(b, s, 1, h) + i];
          p[s] = d * scale;
          mx = std::max(mx, p[s]);
        }
        double sum = 0;
        for (int s = 0; s <= t; ++s) sum += (p[s] = std::exp(p[s] - mx));
        for (int s = 0; s <= t; ++s) p[s] /= sum;
        const float* dout_row = dout + (size_t(b) * T + t) * C + h * hs;
        // dv[s] += p[s] * dout ; dp[s] = dout . v[s]
        double dot = 0;
        for (int s = 0; s <= t; ++s) {
          double d = 0;
          for (int i = 0; i < hs; ++i) {
            dqkv[at(b, s, 2, h) + i] += float(p[s] * dout_row[i]);
            d += double(dout_row[i]) * qkv[at(b, s, 2, h) + i];
          }
          dp[s] = d;
          dot += p[s] * d;
        }
        // dscore[s] = p[s] (dp[s] - sum_j p[j] dp[j]) ; score = scale * q.k
        for (int s = 0; s <= t; ++s) {
          double ds = p[s] * (dp[s] - dot) * scale;
          for (int i = 0; i < hs; ++i) {
            dqkv[at(b, t, 0, h) + i] += float(ds * qkv[at(b, s, 1, h) + i]);
            dqkv[at(b, s, 1, h) + i] += float(ds * q[i]);
          }
        }
      }
}

}  // namespace crucible::kernels::ref

namespace crucible::kernels::ref {

void attention_paged(float* out, const float* q, int ldq, const float* kv, size_t block_stride, int bt,
                     const int32_t* const* tables, const int32_t* pos, int R, int C, int NH) {
  const int hs = C / NH;
  const double scale = 1.0 / std::sqrt(double(hs));
  for (int r = 0; r < R; ++r) {
    const int n = pos[r] + 1;
    auto key = [&](int s) { return kv + size_t(tables[r][s / bt]) * block_stride + size_t(s % bt) * C; };
    std::vector<double> p(static_cast<size_t>(n));
    for (int h = 0; h < NH; ++h) {
      const float* qh = q + size_t(r) * ldq + h * hs;
      double mx = -INFINITY;
      for (int s = 0; s < n; ++s) {
        double d = 0;
        for (int i = 0; i < hs; ++i) d += double(qh[i]) * key(s)[h * hs + i];
        p[size_t(s)] = d * scale;
        mx = std::max(mx, p[size_t(s)]);
      }
      double sum = 0;
      for (int s = 0; s < n; ++s) sum += (p[size_t(s)] = std::exp(p[size_t(s)] - mx));
      for (int i = 0; i < hs; ++i) {
        double acc = 0;
        for (int s = 0; s < n; ++s) acc += p[size_t(s)] * key(s)[size_t(bt) * C + h * hs + i];
        out[size_t(r) * C + h * hs + i] = float(acc / sum);
      }
    }
  }
}

}  // namespace crucible::kernels::ref
