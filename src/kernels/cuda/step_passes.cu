// The step's small passes on the GPU (kernels/cuda/cuda.h;
// contracts in kernels/signatures.inc). Elementwise or row-wise: one thread
// per element or row in a grid-stride loop, so nothing's order depends on the
// grid. The two sums are the exceptions, and fixed: kPartials blocks each
// sum a contiguous chunk (threads strided, then a shared-memory tree), then
// one block sums the partials in the same tree; the grid never depends on the
// GPU, so the bits do not either.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "kernels/cuda/device_util.cuh"

namespace crucible::kernels::cuda {

namespace {

constexpr int kPartials = 1024;  // blocks of a sum's first pass

void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  if (capture_refused(std::string(what) + ": " + cudaGetErrorString(e))) return;
  std::fprintf(stderr, "[cuda] %s: %s\n", what, cudaGetErrorString(e));
  std::abort();
}

__global__ void add_kernel(float* out, const float* a, const float* b, size_t n) {
  CRUCIBLE_GRID_STRIDE(i, n) out[i] = a[i] + b[i];
}

__global__ void fill_kernel(float* x, size_t n, float value) {
  CRUCIBLE_GRID_STRIDE(i, n) x[i] = value;
}

__global__ void convert_kernel(__nv_bfloat16* out, const float* in, size_t n) {
  CRUCIBLE_GRID_STRIDE(i, n) out[i] = __float2bfloat16_rn(in[i]);
}

__global__ void widen_kernel(float* out, const __nv_bfloat16* in, size_t n) {
  CRUCIBLE_GRID_STRIDE(i, n) out[i] = __bfloat162float(in[i]);
}

// out (rows,N; ld ldo) = bf16(sum (rows,N) (+ out) + bias (N)): cuBLASLt's
// BIAS epilogue's arithmetic (alpha AB + beta C, then the bias; one rounding).
__global__ void bias_round_kernel(__nv_bfloat16* out, int ldo, const float* sum, const float* bias, int N,
                                  bool accumulate, size_t n) {
  CRUCIBLE_GRID_STRIDE(i, n) {
    const size_t r = i / size_t(N), c = i % size_t(N);
    __nv_bfloat16& o = out[r * size_t(ldo) + c];
    float v = sum[i];
    if (accumulate) v += __bfloat162float(o);
    o = __float2bfloat16_rn(v + bias[c]);
  }
}

// pieces (W,n): W ranks' copies of n gradients. One thread per element adds
// the W copies in rank order (W is small: the data-parallel group), so the
// bits are the CPU's; no atomics.
__global__ void sum_pieces_kernel(float* sum, __nv_bfloat16* rounded, const __nv_bfloat16* pieces, int W, size_t n) {
  CRUCIBLE_GRID_STRIDE(i, n) {
    float s = 0.0f;
    for (int q = 0; q < W; ++q) s += __bfloat162float(pieces[size_t(q) * n + i]);
    if (rounded) {
      rounded[i] = __float2bfloat16_rn(s);
      s = __bfloat162float(rounded[i]);
    }
    sum[i] = s;
  }
}

// out (N) = logits (N, hi-lo)[n, targets[n] - lo], or 0
template <typename L>
__global__ void target_logits_kernel(float* out, const L* logits, const int32_t* targets, int64_t lo, int64_t hi,
                                     int N) {
  const size_t V = size_t(hi - lo);
  CRUCIBLE_GRID_STRIDE(n, size_t(N)) {
    const int64_t t = targets[n];
    out[n] = t >= lo && t < hi ? float(logits[n * V + size_t(t - lo)]) : 0.0f;
  }
}

// all (R,3,N) -> max, log_sum, losses (N), ranks in rank order
__global__ void combine_kernel(float* max, float* log_sum, float* losses, const float* all, const int32_t* targets,
                               int R, int N) {
  CRUCIBLE_GRID_STRIDE(n, size_t(N)) {
    float M = -INFINITY;
    for (int r = 0; r < R; ++r) M = fmaxf(M, all[size_t(r) * 3 * N + n]);
    float S = 0, x_target = 0;
    for (int r = 0; r < R; ++r) {
      const float* part = all + size_t(r) * 3 * N;
      S += expf(part[N + n] + (part[n] - M));
      x_target += part[2 * N + n];
    }
    max[n] = M;
    log_sum[n] = logf(S);
    losses[n] = targets[n] < 0 ? 0.0f : log_sum[n] - (x_target - M);
  }
}

// In a block of kThreads: thread 0 returns the tree sum of every thread's v.
__device__ double block_sum_f64(double v) {
  __shared__ double sh[kThreads];
  sh[threadIdx.x] = v;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
    __syncthreads();
  }
  return sh[0];
}

// partial[b] = sum of x (or x^2) over block b's contiguous chunk
__global__ void partial_sums_kernel(const float* x, size_t n, bool square, double* partial) {
  const size_t chunk = (n + gridDim.x - 1) / gridDim.x;
  const size_t begin = size_t(blockIdx.x) * chunk, end = begin + chunk < n ? begin + chunk : n;
  double acc = 0;
  for (size_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    const double v = x[i];
    acc += square ? v * v : v;
  }
  const double s = block_sum_f64(acc);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

// sum[0] += the sum of partial (count), or that sum / n rounded to float
// (mean); one block
__global__ void final_sum_kernel(const double* partial, int count, double* sum, size_t mean_of) {
  double acc = 0;
  for (int i = threadIdx.x; i < count; i += blockDim.x) acc += partial[i];
  const double s = block_sum_f64(acc);
  if (threadIdx.x == 0) sum[0] += mean_of ? double(float(s / double(mean_of))) : s;
}

// sum += the sum of x (or x^2; or its mean): two launches, stream-ordered,
// nothing read back. The partials' scratch is reused by the next sum on the
// stream only after this one's kernels have run.
void reduce_into(double* sum, const float* x, size_t n, bool square, bool mean, Stream s) {
  if (n == 0) return;
  double* scratch = reinterpret_cast<double*>(device_scratch(kSums, 2 * kPartials));
  partial_sums_kernel<<<kPartials, kThreads, 0, s>>>(x, n, square, scratch);
  final_sum_kernel<<<1, kThreads, 0, s>>>(scratch, kPartials, sum, mean ? n : 0);
}

}  // namespace

void add(float* out, const float* a, const float* b, size_t n, Stream s) {
  if (n) add_kernel<<<blocks_for(n), kThreads, 0, s>>>(out, a, b, n);
}

void add_bias_round_bf16(bf16* out, int ldo, const float* sum, const float* bias, int rows, int N, bool accumulate,
                         Stream s) {
  const size_t n = size_t(rows) * size_t(N);
  if (n)
    bias_round_kernel<<<blocks_for(n), kThreads, 0, s>>>(reinterpret_cast<__nv_bfloat16*>(out), ldo, sum, bias, N,
                                                         accumulate, n);
}

void fill(float* x, size_t n, float value, Stream s) {
  if (n) fill_kernel<<<blocks_for(n), kThreads, 0, s>>>(x, n, value);
}

void copy_bytes(void* dst, const void* src, size_t bytes, Stream s) {
  if (bytes) check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s), "copy");
}

void add_mean(double* sum, const float* x, size_t n, Stream s) { reduce_into(sum, x, n, false, true, s); }
void add_sum_squares(double* sum, const float* x, size_t n, Stream s) { reduce_into(sum, x, n, true, false, s); }

void convert_to_bf16(bf16* out, const float* in, size_t n, Stream s) {
  if (n) convert_kernel<<<blocks_for(n), kThreads, 0, s>>>(reinterpret_cast<__nv_bfloat16*>(out), in, n);
}

void convert_to_f32(float* out, const bf16* in, size_t n, Stream s) {
  if (n) widen_kernel<<<blocks_for(n), kThreads, 0, s>>>(out, reinterpret_cast<const __nv_bfloat16*>(in), n);
}

void sum_bf16_pieces(float* sum, bf16* rounded, const bf16* pieces, int W, size_t n, Stream s) {
  if (n)
    sum_pieces_kernel<<<blocks_for(n), kThreads, 0, s>>>(sum, reinterpret_cast<__nv_bfloat16*>(rounded),
                                                         reinterpret_cast<const __nv_bfloat16*>(pieces), W, n);
}

void target_logits(float* out, const float* logits, const int32_t* targets, int64_t lo, int64_t hi, int N,
                   Stream s) {
  if (N > 0) target_logits_kernel<<<blocks_for(size_t(N)), kThreads, 0, s>>>(out, logits, targets, lo, hi, N);
}

void target_logits_bf16(float* out, const bf16* logits, const int32_t* targets, int64_t lo, int64_t hi, int N,
                        Stream s) {
  if (N > 0)
    target_logits_kernel<<<blocks_for(size_t(N)), kThreads, 0, s>>>(
        out, reinterpret_cast<const __nv_bfloat16*>(logits), targets, lo, hi, N);
}

void combine_vocab_stats(float* max, float* log_sum, float* losses, const float* all, const int32_t* targets, int R,
                         int N, Stream s) {
  if (N > 0) combine_kernel<<<blocks_for(size_t(N)), kThreads, 0, s>>>(max, log_sum, losses, all, targets, R, N);
}

}  // namespace crucible::kernels::cuda
