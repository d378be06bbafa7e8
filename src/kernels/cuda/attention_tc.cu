// Causal attention in bf16 on the tensor cores (WMMA 16x16x16, bf16 in, f32
// accumulate), forward and backward, in the FlashAttention-2 arrangement:
// the T x T scores never exist in memory, and no atomics anywhere.
//
// Rounding, exactly what the CPU's bf16 attention does in its pairs form
// (kernels/isa/attention.cc; bounds in tests/kernels/bf16_kernels_test.cc's
// dot_bounds, which tests/gpu reuses): q, k, v are bf16 already; P is
// rounded to bf16 before P V (forward) and P^T dO (dV); dO is rounded to
// bf16 where it enters a product, and in D = rowsum(dO o out) alike; dS is
// rounded before dS K (dQ) and dS^T Q (dK). Scores, statistics, softmax and
// every accumulation are f32. The softmax scale multiplies the f32 scores,
// and dQ, dK at the end.
//
// Tiles: 64 query rows (BR) by 64 keys (BC), 128 threads = 4 warps, each
// warp owning 16 rows of its block's tile; head sizes 32, 64, 128
// (attention_tc_supports). Shared memory (dynamic, opted in above 48 KiB;
// rows padded by 16 bytes against bank conflicts, kLdT and friends):
//   forward   Q, K, V tiles (64, hs) bf16; S (64, 64) f32; P (64, 64) bf16;
//             O (64, hs) f32, rescaled by each row's online-softmax factor
//             between tiles (a WMMA accumulator's layout is opaque, so the
//             running output lives in shared memory, not in fragments)
//   dK, dV    per key tile: K, V (64, hs); per query tile Q, dO (64, hs)
//             bf16, lse and D (64) f32; per warp S^T/P^T and dP^T (16, 64)
//             f32, P^T and dS^T (16, 64) bf16; dK, dV in fragments
//   dQ        per query tile Q, dO, lse, D; per key tile K, V; per warp S/P,
//             dP (16, 64) f32, dS (16, 64) bf16; dQ in fragments
// Causal: a query tile reads key tiles 0 .. its own; a key tile is read by
// query tiles its own .. the last. Tiles past T are zero rows, masked.
//
//   qkv (B,T,3C) bf16: head h's q, k, v at columns [h hs, (h+1) hs) of each third
//   out (B,T,C) bf16; lse (B,NH,T) f32 = log sum exp of each scaled score row
//   dout (B,T,C) f32; dqkv (B,T,3C) bf16, overwritten
#include <mma.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>

#include "kernels/cuda/device_util.cuh"

namespace crucible::kernels::cuda {

namespace {

using namespace nvcuda;
using bf = __nv_bfloat16;

constexpr int BR = 64, BC = 64, kWarps = 4, kBlock = 32 * kWarps;
static_assert(BR == 16 * kWarps && BC == BR, "each warp owns 16 rows; query and key tiles align");
// Shared-memory row strides, padded by 16 bytes so the 8 rows of a WMMA
// load's 8x8 piece fall in different banks (an unpadded 128-byte row puts
// them all in the same four); still multiples of 16 bytes, as WMMA needs,
// and every tile starts 32-byte aligned.
template <int HS>
constexpr int kLdT = HS + 8;          // (rows, HS) bf16 tiles: Q, K, V, dO
constexpr int kLdS = BC + 4;          // (16|64, 64) f32 score tiles: S, P, dP
constexpr int kLdP = BC + 8;          // (16|64, 64) bf16 tiles: P, dS
template <int HS>
constexpr int kLdO = HS + 4;          // (64, HS) f32: the forward's running output
// Floats of a backward warp's f32 scratch: two (16, 64) score tiles, which
// also hold the (16, HS) output tile at the end.
template <int HS>
__host__ __device__ constexpr int warp_floats() {
  return 2 * 16 * kLdS > 16 * HS ? 2 * 16 * kLdS : 16 * HS;
}

using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 16, bf, wmma::row_major>;
using FragBRow = wmma::fragment<wmma::matrix_b, 16, 16, 16, bf, wmma::row_major>;
using FragBCol = wmma::fragment<wmma::matrix_b, 16, 16, 16, bf, wmma::col_major>;
using FragAcc = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

// (B,T,3C) offset of row t's part (0 q, 1 k, 2 v) of head h.
__device__ inline size_t at(int b, int t, int part, int h, int T, int C, int hs) {
  return (size_t(b) * T + t) * 3 * C + size_t(part) * C + size_t(h) * hs;
}

// Rows r0 .. r0 + 63 of part `part` of head h into dst (64, HS) bf16, zero
// rows past T; 16-byte vectors (C and hs are multiples of 8).
template <int HS>
__device__ void load_rows(bf* dst, const bf* qkv, int b, int part, int h, int r0, int T, int C) {
  constexpr int V = HS / 8;  // 16-byte vectors per row
  for (int i = threadIdx.x; i < BR * V; i += kBlock) {
    const int r = i / V, c = i % V, t = r0 + r;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (t < T) v = *reinterpret_cast<const uint4*>(qkv + at(b, t, part, h, T, C, HS) + 8 * c);
    *reinterpret_cast<uint4*>(dst + r * kLdT<HS> + 8 * c) = v;
  }
}

// dO rows r0 .. r0 + 63 of head h, rounded to bf16, into dst (64, HS); with
// lse and D of the same rows (0 past T).
template <int HS>
__device__ void load_grad_rows(bf* dst, float* lse_s, float* d_s, const float* dout, const float* lse, const float* D,
                               int b, int h, int r0, int T, int C, int NH) {
  for (int i = threadIdx.x; i < BR * HS / 4; i += kBlock) {
    const int r = i / (HS / 4), c = 4 * (i % (HS / 4)), t = r0 + r;
    float4 v = make_float4(0, 0, 0, 0);
    if (t < T) v = *reinterpret_cast<const float4*>(dout + (size_t(b) * T + t) * C + size_t(h) * HS + c);
    bf* o = dst + r * kLdT<HS> + c;
    o[0] = __float2bfloat16_rn(v.x), o[1] = __float2bfloat16_rn(v.y);
    o[2] = __float2bfloat16_rn(v.z), o[3] = __float2bfloat16_rn(v.w);
  }
  for (int r = threadIdx.x; r < BR; r += kBlock) {
    const int t = r0 + r;
    const size_t row = (size_t(b) * NH + h) * T + t;
    lse_s[r] = t < T ? lse[row] : 0.0f;
    d_s[r] = t < T ? D[row] : 0.0f;
  }
}

// C (16, 64) f32 at c (ld kLdS) = A (16, HS) . B^T, B (64, HS) row-major,
// both tiles of stride kLdT: read along HS (Q K^T, K Q^T, dO V^T, V dO^T).
template <int HS>
__device__ void product_abt(float* c, const bf* a, const bf* b) {
#pragma unroll
  for (int n = 0; n < 4; ++n) {
    FragAcc acc;
    wmma::fill_fragment(acc, 0.0f);
#pragma unroll
    for (int k = 0; k < HS / 16; ++k) {
      FragA fa;
      FragBCol fb;
      wmma::load_matrix_sync(fa, a + 16 * k, kLdT<HS>);
      wmma::load_matrix_sync(fb, b + 16 * n * kLdT<HS> + 16 * k, kLdT<HS>);
      wmma::mma_sync(acc, fa, fb, acc);
    }
    wmma::store_matrix_sync(c + 16 * n, acc, kLdS, wmma::mem_row_major);
  }
}

// acc[n] (16, 16) += A (16, 64) bf16 (ld kLdP) . B (64, HS) row-major (ld
// kLdT): the products along the tile (P V, P^T dO, dS^T Q, dS K).
template <int HS>
__device__ void accumulate_ab(FragAcc (&acc)[HS / 16], const bf* a, const bf* b) {
#pragma unroll
  for (int n = 0; n < HS / 16; ++n)
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      FragA fa;
      FragBRow fb;
      wmma::load_matrix_sync(fa, a + 16 * k, kLdP);
      wmma::load_matrix_sync(fb, b + 16 * k * kLdT<HS> + 16 * n, kLdT<HS>);
      wmma::mma_sync(acc[n], fa, fb, acc[n]);
    }
}

// Writes a warp's fragments (16, HS) times `scale`, rounded, to rows r0 ..
// r0 + 15 of part `part` of dqkv, through the warp's f32 scratch (16, HS).
template <int HS>
__device__ void store_rows(bf* dqkv, FragAcc (&acc)[HS / 16], float* scratch, float scale, int b, int part, int h,
                           int r0, int T, int C) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int n = 0; n < HS / 16; ++n) wmma::store_matrix_sync(scratch + 16 * n, acc[n], HS, wmma::mem_row_major);
  __syncwarp();
  for (int i = lane; i < 16 * HS; i += 32) {
    const int r = i / HS, c = i % HS, t = r0 + r;
    if (t < T) dqkv[at(b, t, part, h, T, C, HS) + c] = __float2bfloat16_rn(scratch[i] * scale);
  }
}

// Grid (T / BR, NH, B), the last query tile (the most keys) first.
template <int HS>
__global__ void __launch_bounds__(kBlock) forward_kernel(bf* out, float* lse, const bf* qkv, int T, int C, int NH) {
  extern __shared__ __align__(128) unsigned char smem[];
  constexpr int LT = kLdT<HS>, LO = kLdO<HS>;
  bf* Qs = reinterpret_cast<bf*>(smem);
  bf* Ks = Qs + BR * LT;
  bf* Vs = Ks + BC * LT;
  float* Ss = reinterpret_cast<float*>(Vs + BC * LT);
  bf* Ps = reinterpret_cast<bf*>(Ss + BR * kLdS);
  float* Os = reinterpret_cast<float*>(Ps + BR * kLdP);
  const int b = blockIdx.z, h = blockIdx.y, q0 = (gridDim.x - 1 - blockIdx.x) * BR;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const float scale = rsqrtf(float(HS));
  load_rows<HS>(Qs, qkv, b, 0, h, q0, T, C);
  for (int i = threadIdx.x; i < BR * LO; i += kBlock) Os[i] = 0.0f;
  // Lane pairs own rows: lane 2r and 2r + 1 hold row r of the warp's 16,
  // columns [32 half, 32 half + 32) of a tile and [HS/2 half, ...) of O.
  const int r = lane / 2, half = lane % 2, row = 16 * warp + r, qi = q0 + row;
  float m = -INFINITY, l = 0.0f;
  const int tiles = (min(q0 + BR, T) - 1) / BC + 1;
  for (int kt = 0; kt < tiles; ++kt) {
    const int k0 = kt * BC;
    __syncthreads();  // the previous tile's K and V are no longer read
    load_rows<HS>(Ks, qkv, b, 1, h, k0, T, C);
    load_rows<HS>(Vs, qkv, b, 2, h, k0, T, C);
    __syncthreads();
    product_abt<HS>(Ss + 16 * warp * kLdS, Qs + 16 * warp * LT, Ks);
    __syncwarp();
    float* srow = Ss + row * kLdS + 32 * half;
    float mx = -INFINITY;
    for (int j = 0; j < 32; ++j) {
      const int key = k0 + 32 * half + j;
      const float v = key <= qi && key < T ? srow[j] * scale : -INFINITY;
      srow[j] = v;
      mx = fmaxf(mx, v);
    }
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    // Key k0 <= q0 <= qi is in every tile read (tiles align), so mx is finite.
    const float m_new = fmaxf(m, mx), alpha = __expf(m - m_new);
    float sum = 0.0f;
    bf* prow = Ps + row * kLdP + 32 * half;
    for (int j = 0; j < 32; ++j) {
      const float p = __expf(srow[j] - m_new);
      prow[j] = __float2bfloat16_rn(p);
      sum += p;
    }
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    l = l * alpha + sum;
    m = m_new;
    float* orow = Os + row * LO + (HS / 2) * half;
    for (int c = 0; c < HS / 2; ++c) orow[c] *= alpha;
    __syncwarp();
    // O (16, HS) += P (16, 64) V (64, HS), the running sum in shared memory.
#pragma unroll
    for (int n = 0; n < HS / 16; ++n) {
      FragAcc acc;
      wmma::load_matrix_sync(acc, Os + 16 * warp * LO + 16 * n, LO, wmma::mem_row_major);
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        FragA fa;
        FragBRow fb;
        wmma::load_matrix_sync(fa, Ps + 16 * warp * kLdP + 16 * k, kLdP);
        wmma::load_matrix_sync(fb, Vs + 16 * k * LT + 16 * n, LT);
        wmma::mma_sync(acc, fa, fb, acc);
      }
      wmma::store_matrix_sync(Os + 16 * warp * LO + 16 * n, acc, LO, wmma::mem_row_major);
    }
    __syncwarp();
  }
  if (qi < T) {
    const float inv = 1.0f / l;
    const float* orow = Os + row * LO + (HS / 2) * half;
    bf* o = out + (size_t(b) * T + qi) * C + size_t(h) * HS + (HS / 2) * half;
    for (int c = 0; c < HS / 2; ++c) o[c] = __float2bfloat16_rn(orow[c] * inv);
    if (half == 0) lse[(size_t(b) * NH + h) * T + qi] = m + logf(l);
  }
}

// Grid (T / BC, NH, B): block forms dK and dV of its 64 keys over the query
// tiles from its own to the last; warp w owns keys 16 w .. 16 w + 15.
template <int HS>
__global__ void __launch_bounds__(kBlock)
    dkv_kernel(bf* dqkv, const float* dout, const bf* qkv, const float* lse, const float* D, int T, int C, int NH) {
  extern __shared__ __align__(128) unsigned char smem[];
  constexpr int LT = kLdT<HS>;
  bf* Ks = reinterpret_cast<bf*>(smem);
  bf* Vs = Ks + BC * LT;
  bf* Qs = Vs + BC * LT;
  bf* dOs = Qs + BR * LT;
  float* Ls = reinterpret_cast<float*>(dOs + BR * LT);
  float* Ds = Ls + BR;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  // Per warp: P^T (16, 64) f32, dP^T (16, 64) f32 (with P^T, room for the
  // (16, HS) f32 output scratch), then P^T and dS^T bf16.
  constexpr int kWarpF = warp_floats<HS>();
  float* Pf = Ds + BR + warp * (kWarpF + 16 * kLdP);  // + 16 kLdP floats = the two bf16 tiles
  float* dPf = Pf + 16 * kLdS;
  bf* Pb = reinterpret_cast<bf*>(Pf + kWarpF);
  bf* dSb = Pb + 16 * kLdP;
  const int b = blockIdx.z, h = blockIdx.y, k0 = blockIdx.x * BC;
  const float scale = rsqrtf(float(HS));
  load_rows<HS>(Ks, qkv, b, 1, h, k0, T, C);
  load_rows<HS>(Vs, qkv, b, 2, h, k0, T, C);
  FragAcc dk[HS / 16], dv[HS / 16];
#pragma unroll
  for (int n = 0; n < HS / 16; ++n) wmma::fill_fragment(dk[n], 0.0f), wmma::fill_fragment(dv[n], 0.0f);
  const int r = lane / 2, half = lane % 2, key = k0 + 16 * warp + r;
  for (int q0 = k0; q0 < T; q0 += BR) {
    __syncthreads();  // the previous query tile is no longer read
    load_rows<HS>(Qs, qkv, b, 0, h, q0, T, C);
    load_grad_rows<HS>(dOs, Ls, Ds, dout, lse, D, b, h, q0, T, C, NH);
    __syncthreads();
    // S^T (16 keys, 64 queries) = K_w Q^T; dP^T = V_w dO^T.
    product_abt<HS>(Pf, Ks + 16 * warp * LT, Qs);
    product_abt<HS>(dPf, Vs + 16 * warp * LT, dOs);
    __syncwarp();
    for (int j = 0; j < 32; ++j) {
      const int c = 32 * half + j, qi = q0 + c;
      const float p = key <= qi && qi < T && key < T ? __expf(Pf[r * kLdS + c] * scale - Ls[c]) : 0.0f;
      Pb[r * kLdP + c] = __float2bfloat16_rn(p);
      dSb[r * kLdP + c] = __float2bfloat16_rn(p * (dPf[r * kLdS + c] - Ds[c]));
    }
    __syncwarp();
    accumulate_ab<HS>(dv, Pb, dOs);  // dV_w += P^T dO
    accumulate_ab<HS>(dk, dSb, Qs);  // dK_w += dS^T Q
    __syncwarp();
  }
  store_rows<HS>(dqkv, dk, Pf, scale, b, 1, h, k0 + 16 * warp, T, C);
  __syncwarp();
  store_rows<HS>(dqkv, dv, Pf, 1.0f, b, 2, h, k0 + 16 * warp, T, C);
}

// Grid (T / BR, NH, B), the last query tile first: block forms dQ of its 64
// queries over the key tiles up to its own; warp w owns queries 16 w ...
template <int HS>
__global__ void __launch_bounds__(kBlock)
    dq_kernel(bf* dqkv, const float* dout, const bf* qkv, const float* lse, const float* D, int T, int C, int NH) {
  extern __shared__ __align__(128) unsigned char smem[];
  constexpr int LT = kLdT<HS>;
  bf* Qs = reinterpret_cast<bf*>(smem);
  bf* dOs = Qs + BR * LT;
  bf* Ks = dOs + BR * LT;
  bf* Vs = Ks + BC * LT;
  float* Ls = reinterpret_cast<float*>(Vs + BC * LT);
  float* Ds = Ls + BR;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  constexpr int kWarpF = warp_floats<HS>();
  float* Sf = Ds + BR + warp * (kWarpF + 8 * kLdP);  // + 8 kLdP floats = the bf16 dS tile
  float* dPf = Sf + 16 * kLdS;
  bf* dSb = reinterpret_cast<bf*>(Sf + kWarpF);
  const int b = blockIdx.z, h = blockIdx.y, q0 = (gridDim.x - 1 - blockIdx.x) * BR;
  const float scale = rsqrtf(float(HS));
  load_rows<HS>(Qs, qkv, b, 0, h, q0, T, C);
  load_grad_rows<HS>(dOs, Ls, Ds, dout, lse, D, b, h, q0, T, C, NH);
  FragAcc dq[HS / 16];
#pragma unroll
  for (int n = 0; n < HS / 16; ++n) wmma::fill_fragment(dq[n], 0.0f);
  const int r = lane / 2, half = lane % 2, row = 16 * warp + r, qi = q0 + row;
  const int tiles = (min(q0 + BR, T) - 1) / BC + 1;
  for (int kt = 0; kt < tiles; ++kt) {
    const int k0 = kt * BC;
    __syncthreads();
    load_rows<HS>(Ks, qkv, b, 1, h, k0, T, C);
    load_rows<HS>(Vs, qkv, b, 2, h, k0, T, C);
    __syncthreads();
    // S (16 queries, 64 keys) = Q_w K^T; dP = dO_w V^T.
    product_abt<HS>(Sf, Qs + 16 * warp * LT, Ks);
    product_abt<HS>(dPf, dOs + 16 * warp * LT, Vs);
    __syncwarp();
    for (int j = 0; j < 32; ++j) {
      const int c = 32 * half + j, key = k0 + c;
      const float p = key <= qi && key < T && qi < T ? __expf(Sf[r * kLdS + c] * scale - Ls[row]) : 0.0f;
      dSb[r * kLdP + c] = __float2bfloat16_rn(p * (dPf[r * kLdS + c] - Ds[row]));
    }
    __syncwarp();
    accumulate_ab<HS>(dq, dSb, Ks);  // dQ_w += dS K
    __syncwarp();
  }
  store_rows<HS>(dqkv, dq, Sf, scale, b, 0, h, q0 + 16 * warp, T, C);
}

// Bytes of shared memory per block, as the kernels lay it out.
template <int HS>
constexpr size_t forward_smem() {
  return size_t(3) * BR * kLdT<HS> * 2 + size_t(BR) * kLdS * 4 + size_t(BR) * kLdP * 2 + size_t(BR) * kLdO<HS> * 4;
}
template <int HS>
constexpr size_t dkv_smem() {
  return size_t(4) * BR * kLdT<HS> * 2 + 2 * BR * 4 + kWarps * (warp_floats<HS>() + 16 * kLdP) * 4;
}
template <int HS>
constexpr size_t dq_smem() {
  return size_t(4) * BR * kLdT<HS> * 2 + 2 * BR * 4 + kWarps * (warp_floats<HS>() + 8 * kLdP) * 4;
}
static_assert(dkv_smem<128>() <= 227 * 1024 && forward_smem<128>() <= 227 * 1024, "Hopper's 227 KiB per block");

// Opts a kernel in to `bytes` of dynamic shared memory on the current GPU
// (the attribute is per device: a process driving two GPUs opts in on each).
template <typename K>
void allow_smem(K kernel, size_t bytes) {
  if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)) != cudaSuccess) {
    std::fprintf(stderr, "[cuda] attention: %zu bytes of shared memory refused: %s\n", bytes,
                 cudaGetErrorString(cudaGetLastError()));
    std::abort();
  }
}

// Whether the current GPU still needs the opt-in of the launcher whose flags
// these are (one per GPU index), marking it done. Not in a capture's way: the
// attribute is a function's, not a stream operation.
bool first_on_this_gpu(std::atomic<bool> (&done)[64]) {
  int device = 0;
  cudaGetDevice(&device);
  return !done[device & 63].exchange(true);
}

template <int HS>
void forward_as(bf* out, float* lse, const bf* qkv, int B, int T, int C, int NH, Stream s) {
  static std::atomic<bool> done[64];
  if (first_on_this_gpu(done)) allow_smem(forward_kernel<HS>, forward_smem<HS>());
  const dim3 grid((T + BR - 1) / BR, NH, B);
  forward_kernel<HS><<<grid, kBlock, forward_smem<HS>(), s>>>(out, lse, qkv, T, C, NH);
}

template <int HS>
void backward_as(bf* dqkv, const float* dout, const bf* qkv, const float* lse, const float* D, int B, int T, int C,
                 int NH, Stream s) {
  static std::atomic<bool> done[64];
  if (first_on_this_gpu(done)) {
    allow_smem(dkv_kernel<HS>, dkv_smem<HS>());
    allow_smem(dq_kernel<HS>, dq_smem<HS>());
  }
  const dim3 grid((T + BR - 1) / BR, NH, B);
  dkv_kernel<HS><<<grid, kBlock, dkv_smem<HS>(), s>>>(dqkv, dout, qkv, lse, D, T, C, NH);
  dq_kernel<HS><<<grid, kBlock, dq_smem<HS>(), s>>>(dqkv, dout, qkv, lse, D, T, C, NH);
}

}  // namespace

bool attention_tc_supports(int C, int NH) {
  if (NH <= 0 || C % NH != 0) return false;
  const int hs = C / NH;
  return hs == 32 || hs == 64 || hs == 128;
}

void attention_forward_bf16_tc(bf16* out, float* lse, const bf16* qkv, int B, int T, int C, int NH, Stream s) {
  if (size_t(B) * T * C == 0) return;
  bf* o = reinterpret_cast<bf*>(out);
  const bf* x = reinterpret_cast<const bf*>(qkv);
  switch (C / NH) {
    case 32: return forward_as<32>(o, lse, x, B, T, C, NH, s);
    case 64: return forward_as<64>(o, lse, x, B, T, C, NH, s);
    case 128: return forward_as<128>(o, lse, x, B, T, C, NH, s);
  }
  std::fprintf(stderr, "[cuda] attention_forward_bf16_tc: head size %d (32, 64 or 128)\n", C / NH);
  std::abort();
}

void attention_backward_bf16_tc(bf16* dqkv, const float* dout, const bf16* qkv, const bf16* out, const float* lse,
                                int B, int T, int C, int NH, Stream s) {
  if (size_t(B) * T * C == 0) return;
  float* D = device_scratch(kAttentionD, size_t(B) * NH * T);
  attention_dot_kernel<true><<<blocks_for(size_t(B) * NH * T), kThreads, 0, s>>>(
      D, dout, reinterpret_cast<const bf*>(out), B, T, C, NH);
  bf* d = reinterpret_cast<bf*>(dqkv);
  const bf* x = reinterpret_cast<const bf*>(qkv);
  switch (C / NH) {
    case 32: return backward_as<32>(d, dout, x, lse, D, B, T, C, NH, s);
    case 64: return backward_as<64>(d, dout, x, lse, D, B, T, C, NH, s);
    case 128: return backward_as<128>(d, dout, x, lse, D, B, T, C, NH, s);
  }
  std::fprintf(stderr, "[cuda] attention_backward_bf16_tc: head size %d (32, 64 or 128)\n", C / NH);
  std::abort();
}

}  // namespace crucible::kernels::cuda
