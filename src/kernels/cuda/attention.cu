// Causal multi-head attention on the GPU, forward and backward, tiled with an
// online softmax in the FlashAttention-2 arrangement (contracts in
// kernels/signatures.inc): the T x T scores never exist in memory.
//
// This first version is written for correctness and determinism, not yet
// for the tensor cores: one thread per query row (forward, dQ) or key row
// (dK, dV), CUDA-core FMAs, K/V or Q/dO tiles staged in shared memory.
// Backward never adds across blocks: dK and dV are formed per key tile
// (looping over the query tiles after it), dQ per query tile (looping over
// the key tiles before it), each recomputing the probabilities from the
// forward's log-sum-exp, so no atomics and the same bits every run.
//
//   qkv (B,T,3C): head h's q, k, v at columns [h hs, (h+1) hs) of each third
//   out (B,T,C), lse (B,NH,T) = log sum exp of each scaled score row
//   dqkv (B,T,3C) overwritten; dout (B,T,C) f32; D (B,NH,T) = dout . out
// f32 or bf16 (qkv, out, dqkv; statistics and dout f32), f32 arithmetic.
#include <cstdio>
#include <cstdlib>

#include "kernels/cuda/device_util.cuh"

namespace crucible::kernels::cuda {

namespace {

// (B,T,3C) offset of row t's part (0 q, 1 k, 2 v) of head h.
__device__ inline size_t at(int b, int t, int part, int h, int T, int C, int hs) {
  return (size_t(b) * T + t) * 3 * C + size_t(part) * C + size_t(h) * hs;
}

// Keys k0 .. k0 + TILE - 1 of head h into Ks and Vs (TILE, hs), zero past
// T; the block waits before (the previous tile is no longer read) and after.
template <int TILE, typename T>
__device__ void load_kv_tile(float* Ks, float* Vs, const T* qkv, int b, int h, int k0, int Tn, int C, int hs) {
  __syncthreads();
  for (int i = threadIdx.x; i < TILE * hs; i += blockDim.x) {
    const int key = k0 + i / hs, d = i % hs;
    Ks[i] = key < Tn ? load(qkv, at(b, key, 1, h, Tn, C, hs) + d) : 0.0f;
    Vs[i] = key < Tn ? load(qkv, at(b, key, 2, h, Tn, C, hs) + d) : 0.0f;
  }
  __syncthreads();
}

// Grid (T / TILE, NH, B), TILE threads: thread i owns query row q0 + i.
template <int MAXHS, int TILE, typename T, typename O>
__global__ void forward_kernel(O* out, float* lse, const T* qkv, int Tn, int C, int NH) {
  extern __shared__ float sh[];  // K tile, V tile: (TILE, hs) each
  const int hs = C / NH, b = blockIdx.z, h = blockIdx.y, q0 = blockIdx.x * TILE, qi = q0 + threadIdx.x;
  float* Ks = sh;
  float* Vs = sh + TILE * hs;
  const bool active = qi < Tn;
  const float scale = rsqrtf(float(hs));
  float q[MAXHS], acc[MAXHS];
#pragma unroll
  for (int d = 0; d < MAXHS; ++d) {
    q[d] = active && d < hs ? load(qkv, at(b, qi, 0, h, Tn, C, hs) + d) * scale : 0.0f;
    acc[d] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;
  const int last_key = min(Tn - 1, q0 + TILE - 1);
  for (int k0 = 0; k0 <= last_key; k0 += TILE) {
    load_kv_tile<TILE>(Ks, Vs, qkv, b, h, k0, Tn, C, hs);
    if (!active) continue;
    const int kend = min(TILE, qi - k0 + 1);  // causal: keys up to qi
    for (int j = 0; j < kend; ++j) {
      float s = 0.0f;
#pragma unroll
      for (int d = 0; d < MAXHS; ++d)
        if (d < hs) s += q[d] * Ks[j * hs + d];
      const float m_new = fmaxf(m, s), corr = expf(m - m_new), p = expf(s - m_new);
      l = l * corr + p;
#pragma unroll
      for (int d = 0; d < MAXHS; ++d)
        if (d < hs) acc[d] = acc[d] * corr + p * Vs[j * hs + d];
      m = m_new;
    }
  }
  if (!active) return;
  const float inv = 1.0f / l;
  const size_t o = (size_t(b) * Tn + qi) * C + size_t(h) * hs;
#pragma unroll
  for (int d = 0; d < MAXHS; ++d)
    if (d < hs) store(out, o + d, acc[d] * inv);
  lse[(size_t(b) * NH + h) * Tn + qi] = m + logf(l);
}

// Grid (T / TILE, NH, B), TILE threads: thread i owns key row k0 + i and
// forms its dK and dV over every query at or after it.
template <int MAXHS, int TILE, typename T>
__global__ void dkv_kernel(T* dqkv, const float* dout, const T* qkv, const float* lse, const float* D, int Tn, int C,
                           int NH) {
  extern __shared__ float sh[];  // Q tile, dO tile: (TILE, hs) each; lse, D: (TILE) each
  const int hs = C / NH, b = blockIdx.z, h = blockIdx.y, k0 = blockIdx.x * TILE, kj = k0 + threadIdx.x;
  float* Qs = sh;
  float* dOs = sh + TILE * hs;
  float* Ls = dOs + TILE * hs;
  float* Ds = Ls + TILE;
  const bool active = kj < Tn;
  const float scale = rsqrtf(float(hs));
  float k[MAXHS], v[MAXHS], dk[MAXHS], dv[MAXHS];
#pragma unroll
  for (int d = 0; d < MAXHS; ++d) {
    k[d] = active && d < hs ? load(qkv, at(b, kj, 1, h, Tn, C, hs) + d) : 0.0f;
    v[d] = active && d < hs ? load(qkv, at(b, kj, 2, h, Tn, C, hs) + d) : 0.0f;
    dk[d] = dv[d] = 0.0f;
  }
  const float* lse_row = lse + (size_t(b) * NH + h) * Tn;
  const float* D_row = D + (size_t(b) * NH + h) * Tn;
  for (int q0 = k0; q0 < Tn; q0 += TILE) {
    __syncthreads();
    for (int i = threadIdx.x; i < TILE * hs; i += blockDim.x) {
      const int qr = q0 + i / hs, d = i % hs;
      Qs[i] = qr < Tn ? load(qkv, at(b, qr, 0, h, Tn, C, hs) + d) : 0.0f;
      dOs[i] = qr < Tn ? dout[(size_t(b) * Tn + qr) * C + size_t(h) * hs + d] : 0.0f;
    }
    for (int i = threadIdx.x; i < TILE; i += blockDim.x) {
      Ls[i] = q0 + i < Tn ? lse_row[q0 + i] : 0.0f;
      Ds[i] = q0 + i < Tn ? D_row[q0 + i] : 0.0f;
    }
    __syncthreads();
    if (!active) continue;
    for (int j = max(0, kj - q0); j < TILE && q0 + j < Tn; ++j) {  // causal: queries from kj on
      float s = 0.0f, dp = 0.0f;
#pragma unroll
      for (int d = 0; d < MAXHS; ++d)
        if (d < hs) s += Qs[j * hs + d] * k[d], dp += dOs[j * hs + d] * v[d];
      const float p = expf(s * scale - Ls[j]), ds = p * (dp - Ds[j]) * scale;
#pragma unroll
      for (int d = 0; d < MAXHS; ++d)
        if (d < hs) dv[d] += p * dOs[j * hs + d], dk[d] += ds * Qs[j * hs + d];
    }
  }
  if (!active) return;
#pragma unroll
  for (int d = 0; d < MAXHS; ++d)
    if (d < hs) store(dqkv, at(b, kj, 1, h, Tn, C, hs) + d, dk[d]), store(dqkv, at(b, kj, 2, h, Tn, C, hs) + d, dv[d]);
}

// Grid (T / TILE, NH, B), TILE threads: thread i owns query row q0 + i and
// forms its dQ over every key up to it.
template <int MAXHS, int TILE, typename T>
__global__ void dq_kernel(T* dqkv, const float* dout, const T* qkv, const float* lse, const float* D, int Tn, int C,
                          int NH) {
  extern __shared__ float sh[];  // K tile, V tile: (TILE, hs) each
  const int hs = C / NH, b = blockIdx.z, h = blockIdx.y, q0 = blockIdx.x * TILE, qi = q0 + threadIdx.x;
  float* Ks = sh;
  float* Vs = sh + TILE * hs;
  const bool active = qi < Tn;
  const float scale = rsqrtf(float(hs));
  float q[MAXHS], dO[MAXHS], dq[MAXHS];
  const size_t o = (size_t(b) * Tn + (active ? qi : 0)) * C + size_t(h) * hs;
#pragma unroll
  for (int d = 0; d < MAXHS; ++d) {
    q[d] = active && d < hs ? load(qkv, at(b, qi, 0, h, Tn, C, hs) + d) : 0.0f;
    dO[d] = active && d < hs ? dout[o + d] : 0.0f;
    dq[d] = 0.0f;
  }
  const float L = active ? lse[(size_t(b) * NH + h) * Tn + qi] : 0.0f;
  const float Dq = active ? D[(size_t(b) * NH + h) * Tn + qi] : 0.0f;
  const int last_key = min(Tn - 1, q0 + TILE - 1);
  for (int k0 = 0; k0 <= last_key; k0 += TILE) {
    load_kv_tile<TILE>(Ks, Vs, qkv, b, h, k0, Tn, C, hs);
    if (!active) continue;
    const int kend = min(TILE, qi - k0 + 1);
    for (int j = 0; j < kend; ++j) {
      float s = 0.0f, dp = 0.0f;
#pragma unroll
      for (int d = 0; d < MAXHS; ++d)
        if (d < hs) s += q[d] * Ks[j * hs + d], dp += dO[d] * Vs[j * hs + d];
      const float p = expf(s * scale - L), ds = p * (dp - Dq) * scale;
#pragma unroll
      for (int d = 0; d < MAXHS; ++d)
        if (d < hs) dq[d] += ds * Ks[j * hs + d];
    }
  }
  if (!active) return;
#pragma unroll
  for (int d = 0; d < MAXHS; ++d)
    if (d < hs) store(dqkv, at(b, qi, 0, h, Tn, C, hs) + d, dq[d]);
}

[[noreturn]] void unsupported(int hs) {
  std::fprintf(stderr, "[cuda] attention: head size %d is above the 128 this kernel holds in registers\n", hs);
  std::abort();
}

template <int MAXHS, int TILE, typename T, typename O>
void forward_as(O* out, float* lse, const T* qkv, int B, int Tn, int C, int NH, Stream s) {
  const dim3 grid((Tn + TILE - 1) / TILE, NH, B);
  const size_t smem = 2 * size_t(TILE) * (C / NH) * sizeof(float);
  forward_kernel<MAXHS, TILE, T, O><<<grid, TILE, smem, s>>>(out, lse, qkv, Tn, C, NH);
}

template <typename T, typename O>
void forward(O* out, float* lse, const T* qkv, int B, int Tn, int C, int NH, Stream s) {
  if (size_t(B) * Tn * C == 0) return;
  const int hs = C / NH;
  if (hs <= 64) return forward_as<64, 64>(out, lse, qkv, B, Tn, C, NH, s);
  if (hs <= 128) return forward_as<128, 32>(out, lse, qkv, B, Tn, C, NH, s);
  unsupported(hs);
}

template <int MAXHS, int TILE, typename T>
void backward_as(T* dqkv, const float* dout, const T* qkv, const float* lse, const float* D, int B, int Tn, int C,
                 int NH, Stream s) {
  const dim3 grid((Tn + TILE - 1) / TILE, NH, B);
  const int hs = C / NH;
  dkv_kernel<MAXHS, TILE, T><<<grid, TILE, (2 * size_t(TILE) * hs + 2 * TILE) * sizeof(float), s>>>(
      dqkv, dout, qkv, lse, D, Tn, C, NH);
  dq_kernel<MAXHS, TILE, T><<<grid, TILE, 2 * size_t(TILE) * hs * sizeof(float), s>>>(dqkv, dout, qkv, lse, D, Tn, C,
                                                                                     NH);
}

template <typename T>
void backward(T* dqkv, const float* dout, const T* qkv, const T* out, const float* lse, int B, int Tn, int C, int NH,
              Stream s) {
  if (size_t(B) * Tn * C == 0) return;
  const int hs = C / NH;
  if (hs > 128) unsupported(hs);
  float* D = device_scratch(kAttentionD, size_t(B) * NH * Tn);
  attention_dot_kernel<false><<<blocks_for(size_t(B) * NH * Tn), kThreads, 0, s>>>(D, dout, out, B, Tn, C, NH);
  if (hs <= 64) return backward_as<64, 64>(dqkv, dout, qkv, lse, D, B, Tn, C, NH, s);
  backward_as<128, 32>(dqkv, dout, qkv, lse, D, B, Tn, C, NH, s);
}

using bf = __nv_bfloat16;

}  // namespace

void attention_forward(float* out, float* lse, const float* qkv, int B, int T, int C, int NH, Stream s) {
  forward(out, lse, qkv, B, T, C, NH, s);
}
void attention_forward_bf16(bf16* out, float* lse, const bf16* qkv, int B, int T, int C, int NH, Stream s) {
  forward(reinterpret_cast<bf*>(out), lse, reinterpret_cast<const bf*>(qkv), B, T, C, NH, s);
}
void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* out, const float* lse, int B,
                        int T, int C, int NH, Stream s) {
  backward(dqkv, dout, qkv, out, lse, B, T, C, NH, s);
}
void attention_backward_bf16(bf16* dqkv, const float* dout, const bf16* qkv, const bf16* out, const float* lse, int B,
                             int T, int C, int NH, Stream s) {
  backward(reinterpret_cast<bf*>(dqkv), dout, reinterpret_cast<const bf*>(qkv), reinterpret_cast<const bf*>(out), lse,
           B, T, C, NH, s);
}

}  // namespace crucible::kernels::cuda
