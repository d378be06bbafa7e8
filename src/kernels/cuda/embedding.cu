// The token and position embedding on the GPU, forward (whole, and the
// vocabulary-parallel lookup and positions) and backward (contracts in
// kernels/signatures.inc).
//
// The backward is a scatter-add that must stay deterministic (several
// positions carry the same token). As the CPU kernel does, each float of
// dwte receives its additions in token order, so the bits equal the CPU's:
// a thread owns one channel of the vocabulary rows whose id falls in its
// block's bucket (id mod kBuckets) and walks every token in order, adding
// the rows of its bucket's tokens. No two threads touch one float; the token
// ids each thread reads are the same across its warp (one broadcast load).
#include "kernels/cuda/device_util.cuh"

namespace crucible::kernels::cuda {

namespace {

constexpr int kBuckets = 64;

// out (N,C) = wte[idx[n]] (V,C) + wpe[n % T] (T_max,C); total = N*C
__global__ void embedding_forward_kernel(float* out, const int32_t* idx, const float* wte, const float* wpe, int T,
                                         int C, size_t total) {
  CRUCIBLE_GRID_STRIDE(i, total) {
    const size_t n = i / C, c = i % C;
    out[i] = wte[size_t(idx[n]) * C + c] + wpe[(n % T) * C + c];
  }
}

// out (N,C) = wte[idx[n] - lo] (hi-lo,C), or 0 outside [lo, hi)
__global__ void embedding_lookup_kernel(float* out, const int32_t* idx, const float* wte, int64_t lo, int64_t hi,
                                        int C, size_t total) {
  CRUCIBLE_GRID_STRIDE(i, total) {
    const size_t n = i / C, c = i % C;
    const int64_t t = idx[n];
    out[i] = t >= lo && t < hi ? wte[size_t(t - lo) * C + c] : 0.0f;
  }
}

// out (N,C) += wpe[(first + n) % T] (T_max,C)
__global__ void add_positions_kernel(float* out, const float* wpe, int first, int T, int C, size_t total) {
  CRUCIBLE_GRID_STRIDE(i, total) {
    const size_t n = i / C, c = i % C;
    out[i] += wpe[((first + n) % T) * C + c];
  }
}

// dwpe (T_max,C) += sum over b of dout (B,T,C)[b, t]: one thread per (t, c), b in order.
__global__ void positions_backward_kernel(float* dwpe, const float* dout, int B, int T, int C) {
  CRUCIBLE_GRID_STRIDE(i, size_t(T) * C) {
    const size_t t = i / C, c = i % C;
    float s = dwpe[i];
    for (int b = 0; b < B; ++b) s += dout[(size_t(b) * T + t) * C + c];
    dwpe[i] = s;
  }
}

// dwte (hi-lo,C) += dout rows of the tokens in [lo, hi), token order per
// float: thread (c, bucket) over every token.
__global__ void tokens_backward_kernel(float* dwte, const float* dout, const int32_t* idx, int64_t lo, int64_t hi,
                                       int N, int C) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  const int bucket = blockIdx.y;
  for (int n = 0; n < N; ++n) {
    const int64_t t = idx[n];
    if (t < lo || t >= hi || (t % kBuckets) != bucket) continue;
    dwte[size_t(t - lo) * C + c] += dout[size_t(n) * C + c];
  }
}

}  // namespace

void embedding_forward(float* out, const int32_t* idx, const float* wte, const float* wpe, int B, int T, int C,
                       Stream s) {
  const size_t total = size_t(B) * T * C;
  if (total) embedding_forward_kernel<<<blocks_for(total), kThreads, 0, s>>>(out, idx, wte, wpe, T, C, total);
}

void embedding_lookup(float* out, const int32_t* idx, const float* wte, int64_t lo, int64_t hi, int N, int C,
                      Stream s) {
  const size_t total = size_t(N) * C;
  if (total) embedding_lookup_kernel<<<blocks_for(total), kThreads, 0, s>>>(out, idx, wte, lo, hi, C, total);
}

void add_positions(float* out, const float* wpe, int first, int N, int T, int C, Stream s) {
  const size_t total = size_t(N) * C;
  if (total) add_positions_kernel<<<blocks_for(total), kThreads, 0, s>>>(out, wpe, first, T, C, total);
}

void embedding_backward(float* dwte, float* dwpe, const float* dout, const int32_t* idx, int64_t lo, int64_t hi,
                        int B, int T, int C, Stream s) {
  if (size_t(B) * T * C == 0) return;
  if (dwpe) positions_backward_kernel<<<blocks_for(size_t(T) * C), kThreads, 0, s>>>(dwpe, dout, B, T, C);
  if (dwte) {
    const dim3 grid((C + kThreads - 1) / kThreads, kBuckets);
    tokens_backward_kernel<<<grid, kThreads, 0, s>>>(dwte, dout, idx, lo, hi, B * T, C);
  }
}

}  // namespace crucible::kernels::cuda
