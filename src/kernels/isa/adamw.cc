// AdamW update and sum of squares (contracts in signatures.inc). Compiled
// once per ISA. (adamw_scalars, one thread's scalar work, is the
// reference's in every table: nothing to vectorise.)
//
// Both are pure streams over parameter-sized buffers (124M floats for GPT-2
// small), so they are bound by memory bandwidth: adamw moves 7 floats per
// element (reads p, g, m, v; writes p, m, v) in a single pass, with all
// per-call constants hoisted out of the loop.
//
// sum_squares feeds the global gradient-norm clip, which every rank must
// agree on bit for bit: it cuts x into at most kMaxChunks chunks whose size
// depends only on n, sums each chunk in double, and adds the chunk sums in
// order, so the result does not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/isa/isa.h"
#include "kernels/isa/vec.h"

namespace crucible::kernels::CRUCIBLE_ISA {
namespace {

// sum_squares widens floats to doubles half a vector at a time, so that the
// double vectors are native registers (a kW-double vector would be spilled).
typedef float vhalf __attribute__((vector_size(CRUCIBLE_VEC_BYTES / 2)));  // kW/2 floats
typedef double vd __attribute__((vector_size(CRUCIBLE_VEC_BYTES)));        // kW/2 doubles
constexpr int kH = kW / 2;

constexpr int64_t kParallelMin = 1 << 15;  // below this, threads cost more than they save
constexpr int64_t kMinChunk = 1 << 14;     // sum_squares: smallest chunk (elements)
constexpr int kMaxChunks = 256;            // sum_squares: most chunks (stack partials)

// sqrt per lane; with -fno-math-errno GCC emits one (v)sqrtps for the loop.
inline vf vsqrt(vf x) {
  vf r;
  for (int i = 0; i < kW; ++i) r[i] = __builtin_sqrtf(x[i]);
  return r;
}

// acc += x[0..kH)^2 in double (the product of two floats is exact in double).
inline void add_squares(vd& acc, const float* x) {
  vhalf h;
  std::memcpy(&h, x, sizeof h);
  vd d = __builtin_convertvector(h, vd);
  acc += d * d;
}

// Per-call constants of the AdamW update, in float.
struct AdamW {
  float lr, b1, b2, eps, decay, gs, bc1, bc2;

  // One vector of elements: m, v updated in place; returns the new p.
  vf step(vf p, vf g, vf& m, vf& v) const {
    g *= gs;
    m = b1 * m + (1.0f - b1) * g;
    v = b2 * v + (1.0f - b2) * g * g;
    return p * decay - lr * (m / bc1) / (vsqrt(v / bc2) + eps);
  }
};

// Sum of squares of x[0..n) in double.
double chunk_sum_squares(const float* x, int64_t n) {
  vd a0{}, a1{}, a2{}, a3{};  // four chains hide the FMA latency
  int64_t i = 0;
  for (; i + 4 * kH <= n; i += 4 * kH) {
    add_squares(a0, x + i);
    add_squares(a1, x + i + kH);
    add_squares(a2, x + i + 2 * kH);
    add_squares(a3, x + i + 3 * kH);
  }
  for (; i + kH <= n; i += kH) add_squares(a0, x + i);
  vd a = (a0 + a1) + (a2 + a3);
  double s = 0;
  for (int l = 0; l < kH; ++l) s += a[l];
  for (; i < n; ++i) s += double(x[i]) * x[i];  // fewer than kW/2 left
  return s;
}

// p, g, m, v: (n). m, v are the first and second moments, updated in place;
// M is their storage type (float, or bf16: widened, updated, rounded back).
// p_bf16 (if set) gets the rounded new p in the same pass.
template <typename M>
void adamw_pass(float* p, bf16* p_bf16, const float* g, M* m, M* v, size_t n, const StepScalars* s,
                float beta1, float beta2, float eps, float weight_decay) {
  // The bias corrections come in double (beta^t for large t), used as float.
  const AdamW opt{.lr = s->lr,
                  .b1 = beta1,
                  .b2 = beta2,
                  .eps = eps,
                  .decay = 1.0f - s->lr * weight_decay,
                  .gs = s->clip,
                  .bc1 = float(s->bc1),
                  .bc2 = float(s->bc2)};
  const int64_t nn = int64_t(n), n_full = nn - nn % kW;
#pragma omp parallel for schedule(static) if (nn >= kParallelMin)
  for (int64_t i = 0; i < n_full; i += kW) {
    vf mv = load(m + i), vv = load(v + i);
    const vf np = opt.step(load(p + i), load(g + i), mv, vv);
    store(p + i, np);
    if (p_bf16) store(p_bf16 + i, np);
    store(m + i, mv);
    store(v + i, vv);
  }
  if (int r = int(nn - n_full)) {
    int64_t i = n_full;
    vf mv = load_partial(m + i, r), vv = load_partial(v + i, r);
    const vf np = opt.step(load_partial(p + i, r), load_partial(g + i, r), mv, vv);
    store_partial(p + i, np, r);
    if (p_bf16) store_partial(p_bf16 + i, np, r);
    store_partial(m + i, mv, r);
    store_partial(v + i, vv, r);
  }
}

}  // namespace

void adamw(float* p, bf16* p_bf16, const float* g, float* m, float* v, size_t n, const StepScalars* s,
           float beta1, float beta2, float eps, float weight_decay) {
  adamw_pass(p, p_bf16, g, m, v, n, s, beta1, beta2, eps, weight_decay);
}
void adamw_bf16_moments(float* p, bf16* p_bf16, const float* g, bf16* m, bf16* v, size_t n,
                        const StepScalars* s, float beta1, float beta2, float eps, float weight_decay) {
  adamw_pass(p, p_bf16, g, m, v, n, s, beta1, beta2, eps, weight_decay);
}

// out (n) = in rounded to bf16: a stream, parallel above kParallelMin.
void convert_to_bf16(bf16* out, const float* in, size_t n) {
  const int64_t nn = int64_t(n), n_full = nn - nn % kW;
#pragma omp parallel for schedule(static) if (nn >= kParallelMin)
  for (int64_t i = 0; i < n_full; i += kW) store(out + i, load(in + i));
  if (int r = int(nn - n_full)) store_partial(out + n_full, load_partial(in + n_full, r), r);
}

// x: (n). sum += sum x^2 in double, independent of the thread count.
void add_sum_squares(double* sum, const float* x, size_t n) {
  const int64_t nn = int64_t(n);
  // Chunk size from n alone, a multiple of 16 so every ISA's vectors tile it.
  int64_t chunk = std::max(kMinChunk, (nn + kMaxChunks - 1) / kMaxChunks);
  chunk = (chunk + 15) / 16 * 16;
  const int chunks = int((nn + chunk - 1) / chunk);
  double partial[kMaxChunks];
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int k = 0; k < chunks; ++k) {
    int64_t begin = k * chunk, end = std::min(nn, begin + chunk);
    partial[k] = chunk_sum_squares(x + begin, end - begin);
  }
  double s = 0;
  for (int k = 0; k < chunks; ++k) s += partial[k];
  *sum += s;
}

}  // namespace crucible::kernels::CRUCIBLE_ISA
