// Softmax + cross-entropy and its gradient on the GPU, whole rows and the
// vocabulary-parallel halves (contracts in kernels/signatures.inc). One block
// per row: V = 50257 is ~200 logits a thread; max and sum by block
// reductions (a fixed tree), the exponentials in f32, the gradient written
// over the logits in place (f32 or bf16, rounded once).
#include "kernels/cuda/device_util.cuh"

namespace crucible::kernels::cuda {

namespace {

constexpr int kRowThreads = 512;

// (max, log sum exp(row - max)) of one row, every thread of the block.
template <typename T>
__device__ float2 row_stats(const T* row, int V) {
  float mx = -INFINITY;
  for (int v = threadIdx.x; v < V; v += blockDim.x) mx = fmaxf(mx, load(row, v));
  mx = block_max(mx);
  float s = 0;
  for (int v = threadIdx.x; v < V; v += blockDim.x) s += expf(load(row, v) - mx);
  return make_float2(mx, logf(block_sum(s)));
}

// losses (N) = lse - row[target]; dscale != 0: row := (softmax - onehot) dscale.
template <typename T>
__global__ void softmax_xent_kernel(float* losses, T* logits, const int32_t* targets, int V, float dscale) {
  const int n = blockIdx.x;
  T* row = logits + size_t(n) * V;
  const int t = targets[n];
  if (t < 0) {  // ignored row: loss 0, gradient 0
    if (threadIdx.x == 0) losses[n] = 0.0f;
    if (dscale != 0.0f)
      for (int v = threadIdx.x; v < V; v += blockDim.x) store(row, v, 0.0f);
    return;
  }
  const float2 st = row_stats(row, V);
  const float lse = st.x + st.y;
  const float target_logit = load(row, t);
  __syncthreads();  // every thread read row[t] before any overwrites it
  if (threadIdx.x == 0) losses[n] = lse - target_logit;
  if (dscale == 0.0f) return;
  for (int v = threadIdx.x; v < V; v += blockDim.x)
    store(row, v, (expf(load(row, v) - lse) - (v == t ? 1.0f : 0.0f)) * dscale);
}

template <typename T>
__global__ void logsumexp_kernel(float* max, float* log_sum, const T* logits, int V) {
  const int n = blockIdx.x;
  const float2 st = row_stats(logits + size_t(n) * V, V);
  if (threadIdx.x == 0) max[n] = st.x, log_sum[n] = st.y;
}

// Columns [offset, offset + V) of the whole vocabulary's rows.
template <typename T>
__global__ void xent_backward_kernel(T* logits, const float* max, const float* log_sum, const int32_t* targets,
                                     int offset, int V, float dscale) {
  const int n = blockIdx.x;
  T* row = logits + size_t(n) * V;
  const int t = targets[n] < 0 ? -1 : targets[n] - offset;
  const float shift = max[n] + log_sum[n];
  for (int v = threadIdx.x; v < V; v += blockDim.x)
    store(row, v, targets[n] < 0 ? 0.0f : (expf(load(row, v) - shift) - (v == t ? 1.0f : 0.0f)) * dscale);
}

}  // namespace

void softmax_cross_entropy(float* losses, float* logits, const int32_t* targets, int N, int V, float dscale,
                           Stream s) {
  if (N > 0) softmax_xent_kernel<<<N, kRowThreads, 0, s>>>(losses, logits, targets, V, dscale);
}
void softmax_cross_entropy_bf16(float* losses, bf16* logits, const int32_t* targets, int N, int V, float dscale,
                                Stream s) {
  if (N > 0)
    softmax_xent_kernel<<<N, kRowThreads, 0, s>>>(losses, reinterpret_cast<__nv_bfloat16*>(logits), targets, V,
                                                  dscale);
}
void logsumexp_rows(float* max, float* log_sum, const float* logits, int N, int V, Stream s) {
  if (N > 0) logsumexp_kernel<<<N, kRowThreads, 0, s>>>(max, log_sum, logits, V);
}
void logsumexp_rows_bf16(float* max, float* log_sum, const bf16* logits, int N, int V, Stream s) {
  if (N > 0)
    logsumexp_kernel<<<N, kRowThreads, 0, s>>>(max, log_sum, reinterpret_cast<const __nv_bfloat16*>(logits), V);
}
void softmax_xent_backward(float* logits, const float* max, const float* log_sum, const int32_t* targets, int offset,
                           int N, int V, float dscale, Stream s) {
  if (N > 0) xent_backward_kernel<<<N, kRowThreads, 0, s>>>(logits, max, log_sum, targets, offset, V, dscale);
}
void softmax_xent_backward_bf16(bf16* logits, const float* max, const float* log_sum, const int32_t* targets,
                                int offset, int N, int V, float dscale, Stream s) {
  if (N > 0)
    xent_backward_kernel<<<N, kRowThreads, 0, s>>>(reinterpret_cast<__nv_bfloat16*>(logits), max, log_sum, targets,
                                                   offset, V, dscale);
}

}  // namespace crucible::kernels::cuda
