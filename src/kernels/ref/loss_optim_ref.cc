#include <cmath>

#include "kernels/reference.h"

namespace crucible::kernels::ref {

void logsumexp_rows(float* max, float* log_sum, const float* logits, int N, int V) {
  for (int n = 0; n < N; ++n) {
    const float* row = logits + size_t(n) * V;
    double mx = -INFINITY;
    for (int v = 0; v < V; ++v) mx = std::max(mx, double(row[v]));
    double sum = 0;
    for (int v = 0; v < V; ++v) sum += std::exp(row[v] - mx);
    max[n] = float(mx);
    log_sum[n] = float(std::log(sum));
  }
}

void softmax_xent_backward(float* logits, const float* max, const float* log_sum,
                           const int32_t* targets, int offset, int N, int V, float dscale) {
  for (int n = 0; n < N; ++n) {
    float* row = logits + size_t(n) * V;
    const int t = targets[n] < 0 ? -1 : targets[n] - offset;
    for (int v = 0; v < V; ++v)
      row[v] = targets[n] < 0
                   ? 0.0f
                   : float((std::exp(double(row[v]) - max[n] - log_sum[n]) - (v == t ? 1.0 : 0.0)) * dscale);
  }
}

void softmax_cross_entropy(float* losses, float* logits, const int32_t* targets, int N, int V,
                           float dscale) {
  for (int n = 0; n < N; ++n) {
    float* row = logits + size_t(n) * V;
    if (targets[n] < 0) {
      losses[n] = 0;
      if (dscale != 0)
        for (int v = 0; v < V; ++v) row[v] = 0;
      continue;
    }
    double mx = -INFINITY;
    for (int v = 0; v < V; ++v) mx = std::max(mx, double(row[v]));
    double sum = 0;
    for (int v = 0; v < V; ++v) sum += std::exp(row[v] - mx);
    double lse = mx + std::log(sum);
    losses[n] = float(lse - row[targets[n]]);
    if (dscale != 0)
      for (int v = 0; v < V; ++v)
        row[v] = float((std::exp(row[v] - lse) - (v == targets[n] ? 1.0 : 0.0)) * dscale);
  }
}

void adamw_scalars(StepScalars* s, float max_norm, float beta1, float beta2) {
  s->clip = 1.0f;
  if (max_norm > 0) {
    const double coef = max_norm / (std::sqrt(s->grad_sq) + 1e-6);
    if (coef < 1.0) s->clip = float(coef);
  }
  s->bc1 = 1.0 - std::pow(double(beta1), s->t);
  s->bc2 = 1.0 - std::pow(double(beta2), s->t);
}

void adamw(float* p, bf16* p_bf16, const float* g, float* m, float* v, size_t n, const StepScalars* s,
           float beta1, float beta2, float eps, float weight_decay) {
  const double lr = s->lr, bc1 = s->bc1, bc2 = s->bc2;
  for (size_t i = 0; i < n; ++i) {
    double gi = double(g[i]) * s->clip;
    double mi = beta1 * double(m[i]) + (1.0 - beta1) * gi;
    double vi = beta2 * double(v[i]) + (1.0 - beta2) * gi * gi;
    m[i] = float(mi);
    v[i] = float(vi);
    double pi = double(p[i]) * (1.0 - lr * weight_decay);
    p[i] = float(pi - lr * (mi / bc1) / (std::sqrt(vi / bc2) + eps));
    if (p_bf16) p_bf16[i] = to_bf16(p[i]);
  }
}

void add_sum_squares(double* sum, const float* x, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; ++i) s += double(x[i]) * x[i];
  *sum += s;
}

void gemm(bool trans_a, bool trans_b, int M, int N, int K, const float* A, int lda,
          const float* B, int ldb, float* C, int ldc, bool accumulate, const float* bias) {
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      double acc = accumulate ? C[size_t(i) * ldc + j] : 0.0;
      if (bias) acc += bias[j];
      for (int k = 0; k < K; ++k) {
        float a = trans_a ? A[size_t(k) * lda + i] : A[size_t(i) * lda + k];
        float b = trans_b ? B[size_t(j) * ldb + k] : B[size_t(k) * ldb + j];
        acc += double(a) * b;
      }
      C[size_t(i) * ldc + j] = float(acc);
    }
}

}  // namespace crucible::kernels::ref
