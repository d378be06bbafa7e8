// The step's small passes (contracts in signatures.inc): elementwise sums,
// fills and copies, the loss's sum, and the vocabulary-parallel
// cross-entropy's per-row pieces. Memory-bound and short; here so that nn,
// optim and parallel never loop over tensor memory themselves (on a GPU it
// is not the host's). Compiled once per ISA.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/isa/isa.h"

namespace crucible::kernels::CRUCIBLE_ISA {

namespace {
// Below this many elements a pass runs on one thread (a parallel region
// costs more than it saves).
constexpr size_t kSerial = size_t(1) << 15;
}  // namespace

// out (n) = a (n) + b (n)
void add(float* out, const float* a, const float* b, size_t n) {
#pragma omp parallel for schedule(static) if (n > kSerial)
  for (size_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

// x (n) = value
void fill(float* x, size_t n, float value) {
#pragma omp parallel for schedule(static) if (n > kSerial)
  for (size_t i = 0; i < n; ++i) x[i] = value;
}

void copy_bytes(void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }

// out (n) = in (n) widened (a shift: the compiler vectorises it)
void convert_to_f32(float* out, const bf16* in, size_t n) {
#pragma omp parallel for schedule(static) if (n > kSerial)
  for (size_t i = 0; i < n; ++i) out[i] = to_f32(in[i]);
}

// pieces (W,n) -> sum (n) in rank order; rounded (n) once where asked
void sum_bf16_pieces(float* sum, bf16* rounded, const bf16* pieces, int W, size_t n) {
#pragma omp parallel for schedule(static) if (n > kSerial)
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

// In index order: the loss is the same bits whatever the thread count.
void add_mean(double* sum, const float* x, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; ++i) s += x[i];
  *sum += float(s / double(n));
}

// out (N) = logits (N, hi-lo)[n, targets[n] - lo] or 0
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

// all (R,3,N) -> max, log_sum, losses (N), ranks combined in rank order
void combine_vocab_stats(float* max, float* log_sum, float* losses, const float* all, const int32_t* targets,
                         int R, int N) {
#pragma omp parallel for schedule(static) if (size_t(N) * R > kSerial / 8)
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

}  // namespace crucible::kernels::CRUCIBLE_ISA
