// AdamW on the GPU (kernels/cuda/cuda.h): one thread per element, a
// grid-stride loop over flat buffers. The same update as kernels/ref's
// (decoupled weight decay on p, bias-corrected moments), in f32, with lr,
// the clip factor and the bias corrections read from the step's scalars in
// device memory (one thread of adamw_scalars forms them in double);
// elementwise, so the order of nothing changes and the result is
// deterministic.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>

#include "kernels/cuda/cuda.h"

namespace crucible::kernels::cuda {

namespace {

__device__ inline float widen(float x) { return x; }
__device__ inline float widen(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ inline void put(float* p, size_t i, float x) { p[i] = x; }
__device__ inline void put(__nv_bfloat16* p, size_t i, float x) { p[i] = __float2bfloat16_rn(x); }

// s: the step's scalars; clip, bc1 and bc2 from grad_sq and t, lr as the host wrote it.
__global__ void adamw_scalars_kernel(StepScalars* s, float max_norm, float beta1, float beta2) {
  s->clip = 1.0f;
  if (max_norm > 0) {
    const double coef = max_norm / (sqrt(s->grad_sq) + 1e-6);
    if (coef < 1.0) s->clip = float(coef);
  }
  s->bc1 = 1.0 - pow(double(beta1), double(s->t));
  s->bc2 = 1.0 - pow(double(beta2), double(s->t));
}

// p, g: (n) f32; m, v: (n) f32 or bf16 (optim.moments: widened, updated in
// f32, rounded back); p_bf16: (n) or null; sc: the step's scalars (read).
template <typename M>
__global__ void adamw_kernel(float* __restrict__ p, __nv_bfloat16* __restrict__ p_bf16, const float* __restrict__ g,
                             M* __restrict__ m, M* __restrict__ v, size_t n, const StepScalars* __restrict__ sc,
                             float beta1, float beta2, float eps, float weight_decay) {
  // Per thread, once: the step's constants (a broadcast load, then registers).
  const float lr = sc->lr, grad_scale = sc->clip;
  const float decay = float(double(lr) * weight_decay);
  const float inv_bc1 = float(1.0 / sc->bc1), inv_sqrt_bc2 = float(1.0 / sqrt(sc->bc2));
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const float gi = g[i] * grad_scale;
    const float mi = beta1 * widen(m[i]) + (1.0f - beta1) * gi;
    const float vi = beta2 * widen(v[i]) + (1.0f - beta2) * gi * gi;
    put(m, i, mi);
    put(v, i, vi);
    // lr * m_hat / (sqrt(v_hat) + eps), with m_hat = m / bc1, sqrt(v_hat) = sqrt(v) / sqrt(bc2).
    const float pi = p[i] * (1.0f - decay) - lr * (mi * inv_bc1) / (sqrtf(vi) * inv_sqrt_bc2 + eps);
    p[i] = pi;
    if (p_bf16) p_bf16[i] = __float2bfloat16_rn(pi);
  }
}

template <typename M>
void launch(float* p, bf16* p_bf16, const float* g, M* m, M* v, size_t n, const StepScalars* sc, float beta1,
            float beta2, float eps, float weight_decay, Stream s) {
  if (n == 0) return;
  constexpr int kThreads = 256;
  // Enough blocks to fill any GPU several times over; the loop covers the rest.
  const int blocks = int(std::min<size_t>((n + kThreads - 1) / kThreads, 65536));
  adamw_kernel<<<blocks, kThreads, 0, s>>>(p, reinterpret_cast<__nv_bfloat16*>(p_bf16), g, m, v, n, sc, beta1, beta2,
                                          eps, weight_decay);
}

}  // namespace

void adamw_scalars(StepScalars* s, float max_norm, float beta1, float beta2, Stream st) {
  adamw_scalars_kernel<<<1, 1, 0, st>>>(s, max_norm, beta1, beta2);
}

void adamw(float* p, bf16* p_bf16, const float* g, float* m, float* v, size_t n, const StepScalars* s, float beta1,
           float beta2, float eps, float weight_decay, Stream st) {
  launch(p, p_bf16, g, m, v, n, s, beta1, beta2, eps, weight_decay, st);
}

void adamw_bf16_moments(float* p, bf16* p_bf16, const float* g, bf16* m, bf16* v, size_t n, const StepScalars* s,
                        float beta1, float beta2, float eps, float weight_decay, Stream st) {
  launch(p, p_bf16, g, reinterpret_cast<__nv_bfloat16*>(m), reinterpret_cast<__nv_bfloat16*>(v), n, s, beta1, beta2,
         eps, weight_decay, st);
}

}  // namespace crucible::kernels::cuda
