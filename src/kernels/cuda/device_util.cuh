// Device helpers the .cu files share (kernels/cuda): grid-stride loops,
// warp and block sums, bf16 stores, and deterministic column sums.
//
// Column sums (a LayerNorm's dw and dbias, GELU's dbias: sums over N rows of
// a (N,C) product) never use atomics: kRowChunks blocks of rows each sum their
// rows in order into a partial (kRowChunks, C), then one thread per column
// adds the partials in chunk order into the output. The chunking is fixed,
// not the GPU's, so the bits are the same on every run and every GPU.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/cuda.h"

namespace crucible::kernels::cuda {

constexpr int kThreads = 256;
constexpr int kRowChunks = 128;

inline int blocks_for(size_t n) {
  const size_t b = (n + kThreads - 1) / kThreads;
  return int(b < 1 ? 1 : b > 65536 ? 65536 : b);
}

#define CRUCIBLE_GRID_STRIDE(i, n) \
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); i += size_t(gridDim.x) * blockDim.x)

__device__ inline float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ inline float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
// Every thread of the block gets the sum (max) of every thread's v; blockDim a
// multiple of 32, at most 1024. A fixed tree: the same bits each time.
template <bool kMax>
__device__ inline float block_reduce(float v) {
  __shared__ float sh[32];
  __shared__ float total;
  v = kMax ? warp_max(v) : warp_sum(v);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads();  // every thread has read the previous call's total
  if (lane == 0) sh[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float t = lane < int(blockDim.x / 32) ? sh[lane] : (kMax ? -INFINITY : 0.0f);
    t = kMax ? warp_max(t) : warp_sum(t);
    if (lane == 0) total = t;
  }
  __syncthreads();
  return total;
}
__device__ inline float block_sum(float v) { return block_reduce<false>(v); }
__device__ inline float block_max(float v) { return block_reduce<true>(v); }

__device__ inline float load(const float* p, size_t i) { return p[i]; }
__device__ inline float load(const __nv_bfloat16* p, size_t i) { return __bfloat162float(p[i]); }
__device__ inline void store(float* p, size_t i, float v) { p[i] = v; }
__device__ inline void store(__nv_bfloat16* p, size_t i, float v) { p[i] = __float2bfloat16_rn(v); }
__device__ inline float round_bf16(float v) { return __bfloat162float(__float2bfloat16_rn(v)); }

// partial (kRowChunks, C) x 2: chunk r's sums over its rows, in row order, of
// value(n, c) (a float2: two sums at once, e.g. dw and dbias).
template <typename F>
__global__ void column_partials_kernel(F value, int N, int C, float* partial) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  const int chunk = (N + kRowChunks - 1) / kRowChunks;
  const int begin = blockIdx.y * chunk, end = min(N, begin + chunk);
  float s0 = 0, s1 = 0;
  for (int n = begin; n < end; ++n) {
    const float2 v = value(n, c);
    s0 += v.x, s1 += v.y;
  }
  partial[size_t(blockIdx.y) * C + c] = s0;
  partial[size_t(kRowChunks + blockIdx.y) * C + c] = s1;
}

// out0 (C) += the partials' first sums, out1 (C, may be null) += the second's, in chunk order.
__global__ void column_finish_kernel(const float* partial, int C, float* out0, float* out1);

// Device scratch of the current GPU: at least `floats` floats in slot
// `slot`, grown as needed (growing waits for the GPU), one buffer per slot
// and GPU; the kernels of one stream use a slot in turn.
// Attention's D (B,NH,T) = dout . out per head row, one thread a row; with
// RoundDout, dout rounded to bf16 first (the tensor-core backward's dO).
template <bool RoundDout, typename O>
__global__ void attention_dot_kernel(float* D, const float* dout, const O* out, int B, int T, int C, int NH) {
  const int hs = C / NH;
  CRUCIBLE_GRID_STRIDE(i, size_t(B) * NH * T) {
    const int t = int(i % T), h = int(i / T % NH), b = int(i / (size_t(T) * NH));
    const size_t o = (size_t(b) * T + t) * C + size_t(h) * hs;
    float s = 0.0f;
    for (int d = 0; d < hs; ++d) s += (RoundDout ? round_bf16(dout[o + d]) : dout[o + d]) * load(out, o + d);
    D[i] = s;
  }
}

enum ScratchSlot { kColumnSums, kAttentionD, kSums, kGemmBias, kScratchSlots };
float* device_scratch(ScratchSlot slot, size_t floats);

// out0 (+= sums of value.x over rows), out1 (+= of value.y; null: none).
template <typename F>
void column_sums(F value, int N, int C, float* out0, float* out1, Stream s) {
  if (N <= 0 || C <= 0) return;
  float* partial = device_scratch(kColumnSums, size_t(2) * kRowChunks * size_t(C));
  const dim3 grid((C + kThreads - 1) / kThreads, kRowChunks);
  column_partials_kernel<<<grid, kThreads, 0, s>>>(value, N, C, partial);
  column_finish_kernel<<<(C + kThreads - 1) / kThreads, kThreads, 0, s>>>(partial, C, out0, out1);
}

}  // namespace crucible::kernels::cuda
