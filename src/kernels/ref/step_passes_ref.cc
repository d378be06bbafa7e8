#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/reference.h"

namespace crucible::kernels::ref {

void add(float* out, const float* a, const float* b, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void fill(float* x, size_t n, float value) {
  for (size_t i = 0; i < n; ++i) x[i] = value;
}

void copy_bytes(void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }

void add_mean(double* sum, const float* x, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; ++i) s += x[i];
  *sum += float(s / double(n));
}

void target_logits(float* out, const float* logits, const int32_t* targets, int64_t lo, int64_t hi, int N) {
  const size_t V = size_t(hi - lo);
  for (int n = 0; n < N; ++n)
    out[n] = targets[n] >= lo && targets[n] < hi ? logits[size_t(n) * V + size_t(targets[n] - lo)] : 0.0f;
}

void target_logits_bf16(float* out, const bf16* logits, const int32_t* targets, int64_t lo, int64_t hi, int N) {
  const size_t V = size_t(hi - lo);
  for (int n = 0; n < N; ++n)
    out[n] = targets[n] >= lo && targets[n] < hi ? to_f32(logits[size_t(n) * V + size_t(targets[n] - lo)]) : 0.0f;
}

void combine_vocab_stats(float* max, float* log_sum, float* losses, const float* all, const int32_t* targets,
                         int R, int N) {
  for (int n = 0; n < N; ++n) {
    float M = -INFINITY;
    for (int r = 0; r < R; ++r) M = std::max(M, all[size_t(r) * 3 * N + n]);
    float S = 0, x_target = 0;
    for (int r = 0; r < R; ++r) {
      const float* part = all + size_t(r) * 3 * N;
      S += std::exp(part[N + n] + (part[n] - M));
      x_target += part[2 * N + n];
    }
    max[n] = M;
    log_sum[n] = std::log(S);
    losses[n] = targets[n] < 0 ? 0.0f : log_sum[n] - (x_target - M);
  }
}

}  // namespace crucible::kernels::ref
