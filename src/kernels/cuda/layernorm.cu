// LayerNorm fused with the residual add, forward and backward, on the GPU
// (contracts in kernels/signatures.inc; the CPU's in kernels/isa/layernorm.cc).
// One warp per row: C = 768 is 24 floats a lane; the row's statistics in f32
// by warp sums (a fixed tree). The weight and bias gradients are column sums
// over the rows (device_util.cuh: deterministic, no atomics).
#include "kernels/cuda/device_util.cuh"

namespace crucible::kernels::cuda {

namespace {

constexpr int kWarps = kThreads / 32;  // rows per block

// x = a + b (b may be null); resid_out = x (may be null); out = (x - mean)
// rstd w + bias; mean, rstd (N). a, b, resid_out, w, bias f32; out f32 or bf16.
template <typename O>
__global__ void forward_kernel(float* resid_out, O* out, float* mean, float* rstd, const float* a, const float* b,
                               const float* w, const float* bias, int N, int C) {
  const int n = blockIdx.x * kWarps + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (n >= N) return;
  const size_t row = size_t(n) * C;
  float s = 0;
  for (int c = lane; c < C; c += 32) s += a[row + c] + (b ? b[row + c] : 0.0f);
  const float m = warp_sum(s) / C;
  float v = 0;
  for (int c = lane; c < C; c += 32) {
    const float d = a[row + c] + (b ? b[row + c] : 0.0f) - m;
    v += d * d;
  }
  const float r = rsqrtf(warp_sum(v) / C + 1e-5f);
  for (int c = lane; c < C; c += 32) {
    const float x = a[row + c] + (b ? b[row + c] : 0.0f);
    if (resid_out) resid_out[row + c] = x;
    store(out, row + c, (x - m) * r * w[c] + bias[c]);
  }
  if (lane == 0) mean[n] = m, rstd[n] = r;
}

// dx (N,C) += (dnorm - mean(dnorm) - norm mean(dnorm norm)) rstd, dnorm = dout w.
__global__ void backward_dx_kernel(float* dx, const float* dout, const float* x, const float* w, const float* mean,
                                   const float* rstd, int N, int C) {
  const int n = blockIdx.x * kWarps + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (n >= N) return;
  const size_t row = size_t(n) * C;
  const float m = mean[n], r = rstd[n];
  float s = 0, sn = 0;
  for (int c = lane; c < C; c += 32) {
    const float dnorm = dout[row + c] * w[c];
    s += dnorm;
    sn += dnorm * (x[row + c] - m) * r;
  }
  const float dnorm_mean = warp_sum(s) / C, dnorm_norm_mean = warp_sum(sn) / C;
  for (int c = lane; c < C; c += 32) {
    const float norm = (x[row + c] - m) * r;
    dx[row + c] += (dout[row + c] * w[c] - dnorm_mean - norm * dnorm_norm_mean) * r;
  }
}

// dw's and dbias' terms of (n, c): norm dout and dout.
struct WeightTerms {
  const float *dout, *x, *mean, *rstd;
  int C;
  __device__ float2 operator()(int n, int c) const {
    const size_t i = size_t(n) * C + c;
    return make_float2((x[i] - mean[n]) * rstd[n] * dout[i], dout[i]);
  }
};

int row_blocks(int N) { return (N + kWarps - 1) / kWarps; }

}  // namespace

void residual_layernorm_forward(float* resid_out, float* out, float* mean, float* rstd, const float* a, const float* b,
                                const float* w, const float* bias, int N, int C, Stream s) {
  if (N > 0) forward_kernel<<<row_blocks(N), kThreads, 0, s>>>(resid_out, out, mean, rstd, a, b, w, bias, N, C);
}

void residual_layernorm_forward_bf16(float* resid_out, bf16* out, float* mean, float* rstd, const float* a,
                                     const float* b, const float* w, const float* bias, int N, int C, Stream s) {
  if (N > 0)
    forward_kernel<<<row_blocks(N), kThreads, 0, s>>>(resid_out, reinterpret_cast<__nv_bfloat16*>(out), mean, rstd,
                                                      a, b, w, bias, N, C);
}

void layernorm_backward(float* dx, float* dw, float* dbias, const float* dout, const float* x, const float* w,
                        const float* mean, const float* rstd, int N, int C, Stream s) {
  if (N <= 0) return;
  backward_dx_kernel<<<row_blocks(N), kThreads, 0, s>>>(dx, dout, x, w, mean, rstd, N, C);
  column_sums(WeightTerms{dout, x, mean, rstd, C}, N, C, dw, dbias, s);
}

}  // namespace crucible::kernels::cuda
