// Bias + GELU (tanh approximation), forward and backward, on the GPU
// (contracts in kernels/signatures.inc). Elementwise, one thread per element;
// the bias gradient is a column sum (device_util.cuh: deterministic).
#include "kernels/cuda/device_util.cuh"

namespace crucible::kernels::cuda {

namespace {

constexpr float kS = 0.7978845608028654f;  // sqrt(2/pi)

__device__ inline float gelu(float x) { return 0.5f * x * (1.0f + tanhf(kS * (x + 0.044715f * x * x * x))); }
__device__ inline float gelu_grad(float x) {
  const float th = tanhf(kS * (x + 0.044715f * x * x * x));
  return 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * kS * (1.0f + 3.0f * 0.044715f * x * x);
}

// pre (N,C) += bias (bias may be null); out = gelu(pre). In bf16 pre is
// rounded first and gelu reads the rounded value, as backward will.
template <typename T>
__global__ void forward_kernel(T* out, T* pre, const float* bias, int C, size_t n) {
  CRUCIBLE_GRID_STRIDE(i, n) {
    float x = load(pre, i) + (bias ? bias[i % C] : 0.0f);
    if (sizeof(T) == 2) x = round_bf16(x);
    store(pre, i, x);
    store(out, i, gelu(x));
  }
}

// dpre (N,C) = dout gelu'(pre); dpre may alias dout (f32).
template <typename T>
__global__ void backward_kernel(T* dpre, const float* dout, const T* pre, size_t n) {
  CRUCIBLE_GRID_STRIDE(i, n) store(dpre, i, dout[i] * gelu_grad(load(pre, i)));
}

// dbias's term of (n, c): the f32 dpre, before any rounding.
template <typename T>
struct BiasTerm {
  const float* dout;
  const T* pre;
  int C;
  __device__ float2 operator()(int n, int c) const {
    const size_t i = size_t(n) * C + c;
    return make_float2(dout[i] * gelu_grad(load(pre, i)), 0.0f);
  }
};

template <typename T>
void backward(T* dpre, float* dbias, const float* dout, const T* pre, int N, int C, Stream s) {
  const size_t n = size_t(N) * C;
  if (n == 0) return;
  // The bias sums first: dpre may overwrite dout.
  column_sums(BiasTerm<T>{dout, pre, C}, N, C, dbias, nullptr, s);
  backward_kernel<<<blocks_for(n), kThreads, 0, s>>>(dpre, dout, pre, n);
}

}  // namespace

void bias_gelu_forward(float* out, float* pre, const float* bias, int N, int C, Stream s) {
  const size_t n = size_t(N) * C;
  if (n) forward_kernel<<<blocks_for(n), kThreads, 0, s>>>(out, pre, bias, C, n);
}

void bias_gelu_forward_bf16(bf16* out, bf16* pre, const float* bias, int N, int C, Stream s) {
  const size_t n = size_t(N) * C;
  if (n)
    forward_kernel<<<blocks_for(n), kThreads, 0, s>>>(reinterpret_cast<__nv_bfloat16*>(out),
                                                      reinterpret_cast<__nv_bfloat16*>(pre), bias, C, n);
}

void bias_gelu_backward(float* dpre, float* dbias, const float* dout, const float* pre, int N, int C, Stream s) {
  backward(dpre, dbias, dout, pre, N, C, s);
}

void bias_gelu_backward_bf16(bf16* dpre, float* dbias, const float* dout, const bf16* pre, int N, int C, Stream s) {
  backward(reinterpret_cast<__nv_bfloat16*>(dpre), dbias, dout, reinterpret_cast<const __nv_bfloat16*>(pre), N, C, s);
}

}  // namespace crucible::kernels::cuda
