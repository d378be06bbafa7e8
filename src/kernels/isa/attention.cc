// Causal multi-head attention, forward and backward, as one tiled kernel with
// online softmax (FlashAttention-2 on a CPU). Contracts in signatures.inc;
// compiled once per ISA.
//
// Work is cut into square tiles of kBt queries x kBt keys; a tile's scores
// live on the stack, never a T x T matrix, and nothing is heap-allocated.
// Every product inside a tile is the same small GEMM, C (M,N) (+)= A (M,K) B (K,N),
// done by one register-tiled micro-kernel: kMR rows of A broadcast against
// up to 3 vectors of a row of B, so each loaded vector feeds kMR FMAs. Its N
// side is vectorised, so each product is oriented to put a contiguous,
// padded-to-kW dimension there:
//   forward   S^T (keys, queries) = K Q^T : the query tile is transposed once
//             and reused by every key tile; softmax then runs down columns,
//             vectorised over queries, with no horizontal reductions.
//   backward  the key tile is outer (K^T, V^T transposed once per key tile),
//             query tiles inner; dK, dV accumulate on the stack.
// On a diagonal tile (query tile == key tile) each micro-block skips the part
// above the causal diagonal (the Causal modes of tile_gemm) and the softmax
// masks by select, so stale stack values are never read into a result.
//
// Threads: forward over (b, h, query tile); backward over (b, h), each pair
// owning its columns of dqkv, and dQ summed over key tiles in a fixed order,
// so results are bitwise independent of the thread count.
//
// Stack: the tiles are sized for hs <= kMaxHs, about 136 KB per thread in
// forward and 264 KB in backward; OpenMP's default worker stacks (MBs) hold
// that. kBt = 32 keeps that small; 48 and 64 measured no faster on AVX2.
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "kernels/isa/isa.h"
#include "kernels/isa/vec.h"

namespace crucible::kernels::CRUCIBLE_ISA {
namespace {

constexpr int kBt = 32;      // tile edge in queries and keys (multiple of kW and kMR)
constexpr int kMaxHs = 256;  // bound of the stack tiles: 32 KB each at hs 256
// AVX-512 has 32 vector registers: 8 rows x 3 vectors of accumulators fit.
constexpr int kMR = kW == 16 ? 8 : 4;
static_assert(kBt % kW == 0 && kW % kMR == 0, "tiles must split into micro-blocks");

inline int round_up(int x, int m) { return (x + m - 1) / m * m; }

inline vf iota() {
  vf v;
  for (int i = 0; i < kW; ++i) v[i] = float(i);
  return v;
}

// splat(*p) as one broadcast load. splat's 0 + x keeps an add the compiler
// may not drop (it would change -0.0), and portable spellings of a broadcast
// come out as insert + shuffle sequences inside the micro-kernel.
inline vf broadcast(const float* p) {
#if defined(__AVX512F__)
  return vf(_mm512_set1_ps(*p));
#elif defined(__AVX__)
  return vf(_mm256_broadcast_ss(p));
#else
  return vf(_mm_load1_ps(p));
#endif
}

// A block of rows of one head: row r at p + r * ld, hsp floats readable,
// those past hs zero.
struct Rows {
  const float* p;
  int ld;
};

// Rows [0, n) of src (row stride src_ld), padded with zero rows to n_pad. Read
// in place when that is already safe (no padding rows or columns), else copied
// into buf (n_pad, hsp): this keeps copies off the common hs % kW == 0 path.
// bf16 rows are always copied (widened).
template <typename E>
Rows rows_view(float* buf, const E* src, size_t src_ld, int n, int n_pad, int hs, int hsp) {
  if constexpr (sizeof(E) == 4)
    if (n == n_pad && hs == hsp) return {src, int(src_ld)};
  for (int r = 0; r < n_pad; ++r)
    for (int d = 0; d < hsp; d += kW)
      store(buf + r * hsp + d, r >= n         ? vf{}
                               : d + kW <= hs ? load(src + r * src_ld + d)
                                              : load_partial(src + r * src_ld + d, hs - d));
  return {buf, hsp};
}

// dst (n,hs) row stride dst_ld (+)= s * src (n,hsp): the tail of a row goes
// through store_partial so the neighbouring head is never touched.
template <typename E>
void store_rows(E* dst, size_t dst_ld, const float* src, int n, int hs, int hsp, float s,
                bool accumulate) {
  for (int r = 0; r < n; ++r)
    for (int d = 0; d < hs; d += kW) {
      E* o = dst + r * dst_ld + d;
      const int w = std::min(kW, hs - d);
      vf v = s * load(src + r * hsp + d);
      if (accumulate) v += w == kW ? load(o) : load_partial(o, w);
      if (w == kW)
        store(o, v);
      else
        store_partial(o, v, w);
    }
}

// Which part of a diagonal tile's product can be nonzero. Rows of the micro
// block are [r0, r0+kMR); all indices are local to the tile (q0 == k0).
enum class Causal {
  kNone,
  kColsUpToRow,  // C rows are queries, columns keys: only key <= query
  kColsFromRow,  // C rows are keys, columns queries: only query >= key
  kKUpToRow,     // rows queries, reduction over keys <= query
  kKFromRow,     // rows keys, reduction over queries >= key
};

// C[m, 0:NR*kW) (+)= sum_k A(m,k) B[k, 0:NR*kW) for kMR rows m, k in [k_lo,k_hi).
// A(m,k) = A[m*ars + k*acs] (a broadcast, so A may be read transposed).
template <int NR>
inline void micro_tile(int k_lo, int k_hi, const float* A, int ars, int acs, const float* Bm,
                       int ldb, float* Cm, int ldc, bool accumulate) {
  vf c[kMR][NR];
#pragma GCC unroll 8
  for (int m = 0; m < kMR; ++m)
#pragma GCC unroll 4
    for (int n = 0; n < NR; ++n) c[m][n] = accumulate ? load(Cm + m * ldc + n * kW) : vf{};
  const float* a = A + size_t(k_lo) * acs;
  const float* b = Bm + size_t(k_lo) * ldb;
  for (int k = k_lo; k < k_hi; ++k, a += acs, b += ldb) {
    vf bv[NR];
#pragma GCC unroll 4
    for (int n = 0; n < NR; ++n) bv[n] = load(b + n * kW);
#pragma GCC unroll 8
    for (int m = 0; m < kMR; ++m) {
      vf av = broadcast(a + m * ars);
#pragma GCC unroll 4
      for (int n = 0; n < NR; ++n) c[m][n] = fma(av, bv[n], c[m][n]);
    }
  }
#pragma GCC unroll 8
  for (int m = 0; m < kMR; ++m)
#pragma GCC unroll 4
    for (int n = 0; n < NR; ++n) store(Cm + m * ldc + n * kW, c[m][n]);
}

// C (M,N) (+)= A (M,K) B (K,N), ldc/ldb row strides; M a multiple of kMR,
// N of kW. Skips (or, for "=", zeroes) what `causal` says is zero.
void tile_gemm(int M, int N, int K, const float* A, int ars, int acs, const float* Bm, int ldb,
               float* Cm, int ldc, bool accumulate, Causal causal) {
  for (int r0 = 0; r0 < M; r0 += kMR) {
    int n_lo = 0, n_hi = N, k_lo = 0, k_hi = K;
    if (causal == Causal::kColsUpToRow) n_hi = std::min(N, round_up(r0 + kMR, kW));
    if (causal == Causal::kColsFromRow) n_lo = r0 / kW * kW;
    if (causal == Causal::kKUpToRow) k_hi = std::min(K, r0 + kMR);
    if (causal == Causal::kKFromRow) k_lo = r0;
    const float* a = A + size_t(r0) * ars;
    float* c = Cm + size_t(r0) * ldc;
    for (int c0 = n_lo; c0 < n_hi;) {
      // 3 vectors where possible, but never leave a lone one (4 = 2+2): one
      // vector gives too few accumulators to hide the FMA latency.
      const int nv = (n_hi - c0) / kW;
      const int take = nv <= 2 ? nv : nv % 3 == 1 ? 2 : 3;
      if (take == 3) micro_tile<3>(k_lo, k_hi, a, ars, acs, Bm + c0, ldb, c + c0, ldc, accumulate);
      if (take == 2) micro_tile<2>(k_lo, k_hi, a, ars, acs, Bm + c0, ldb, c + c0, ldc, accumulate);
      if (take == 1) micro_tile<1>(k_lo, k_hi, a, ars, acs, Bm + c0, ldb, c + c0, ldc, accumulate);
      c0 += take * kW;
    }
  }
}

struct Dims {
  int T, C, hs, hsp;
  float scale;
  Dims(int T_, int C_, int NH) : T(T_), C(C_), hs(C_ / NH) {
    CRUCIBLE_CHECK(C % NH == 0 && hs <= kMaxHs, "[attention] need hs = C/NH <= 256");
    hsp = round_up(hs, kW);
    scale = 1.0f / std::sqrt(float(hs));
  }
};

// One query tile [q0, q0+nq) of head h.
//   qkv (T,3C) and out (T,C) point at the batch row; lse (T) at (b,h).
template <typename E>
void forward_tile(E* out, float* lse, const E* qkv, const Dims& d, int h, int qt) {
  const int hs = d.hs, hsp = d.hsp, C3 = 3 * d.C;
  const int q0 = qt * kBt, nq = std::min(kBt, d.T - q0), nq_pad = round_up(nq, kW);
  alignas(64) float Qt[kMaxHs * kBt];           // (hs, Bq) scale * q, transposed; zero past nq
  alignas(64) float Kbuf[kBt * kMaxHs];         // (Bk, hsp) when K must be copied
  alignas(64) float Vbuf[kBt * kMaxHs];         // (Bk, hsp) when V must be copied
  alignas(64) float St[kBt * kBt];              // (Bk, Bq) scores, then probabilities
  alignas(64) float acc[kBt * kMaxHs];          // (Bq, hsp) unnormalised output
  alignas(64) float m[kBt], l[kBt], corr[kBt];  // (Bq) running max, sum, rescale
  for (int i = 0; i < nq_pad; ++i) {
    const E* q = qkv + size_t(q0 + i) * C3 + h * hs;
    for (int c = 0; c < hs; ++c) Qt[c * kBt + i] = i < nq ? d.scale * elem(q[c]) : 0.0f;
  }
  std::fill(acc, acc + nq_pad * hsp, 0.0f);
  std::fill(m, m + kBt, -INFINITY);
  std::fill(l, l + kBt, 0.0f);
  const vf lane = iota();
  for (int kt = 0; kt <= qt; ++kt) {
    const int k0 = kt * kBt, nk = std::min(kBt, d.T - k0), nk_pad = round_up(nk, kW);
    const bool diag = kt == qt;
    const E* kv = qkv + size_t(k0) * C3 + d.C + h * hs;
    const Rows K = rows_view(Kbuf, kv, C3, nk, nk_pad, hs, hsp);
    const Rows V = rows_view(Vbuf, kv + d.C, C3, nk, nk_pad, hs, hsp);
    // S^T (Bk,Bq) = K (Bk,hs) Q^T (hs,Bq)
    tile_gemm(nk_pad, nq_pad, hs, K.p, K.ld, 1, Qt, kBt, St, kBt, false,
              diag ? Causal::kColsFromRow : Causal::kNone);
    // Online softmax down each column: kW queries at a time over the keys.
    for (int cv = 0; cv < nq_pad; cv += kW) {
      const vf qi = lane + float(cv);
      // On the diagonal no query of this vector sees a key past cv + kW - 1.
      const int j_end = diag ? std::min(nk_pad, cv + kW) : nk_pad;
      vf mx = splat(-INFINITY);
      for (int j = 0; j < j_end; ++j) {
        vf s = load(St + j * kBt + cv);
        if (diag) s = qi >= splat(float(j)) ? s : splat(-INFINITY);
        mx = vmax(mx, s);
      }
      const vf m_old = load(m + cv), m_new = vmax(m_old, mx);
      vf sum = {};
      for (int j = 0; j < j_end; ++j) {
        vf p = vexp(load(St + j * kBt + cv) - m_new);
        if (diag) p = qi >= splat(float(j)) ? p : vf{};
        store(St + j * kBt + cv, p);
        sum += p;
      }
      const vf c = vexp(m_old - m_new);  // exp(-inf) = 0 on the first tile
      store(l + cv, load(l + cv) * c + sum);
      store(m + cv, m_new);
      store(corr + cv, c);
    }
    for (int i = 0; i < nq_pad; ++i)
      for (int c = 0; c < hsp; c += kW) store(acc + i * hsp + c, load(acc + i * hsp + c) * corr[i]);
    // acc (Bq,hsp) += P (Bq,Bk) V (Bk,hsp), P read transposed out of S^T
    tile_gemm(nq_pad, hsp, nk_pad, St, 1, kBt, V.p, V.ld, acc, hsp, true,
              diag ? Causal::kKUpToRow : Causal::kNone);
  }
  for (int i = 0; i < nq; ++i) {
    const float inv = 1.0f / l[i];
    store_rows(out + size_t(q0 + i) * d.C + h * hs, d.C, acc + i * hsp, 1, hs, hsp, inv, false);
    lse[q0 + i] = m[i] + std::log(l[i]);
  }
}

// All of head h: key tiles outer, query tiles inner. The score scale rides on
// K^T for S and is applied to dK and dQ as they are stored.
//   qkv, dqkv (T,3C); dout, out (T,C) point at the batch row; lse (T) at (b,h)
//   dq_acc (T, hsp): bf16 only, dQ summed over key tiles in f32, rounded once
template <typename E>
void backward_head(E* dqkv, const float* dout, const E* qkv, const E* out, const float* lse,
                   const Dims& d, int h, float* dq_acc) {
  const int hs = d.hs, hsp = d.hsp, C3 = 3 * d.C, nt = (d.T + kBt - 1) / kBt;
  alignas(64) float Kt[kMaxHs * kBt];     // (hs, Bk) scale * k, transposed
  alignas(64) float Vt[kMaxHs * kBt];     // (hs, Bk) v transposed
  alignas(64) float Kbuf[kBt * kMaxHs];   // (Bk, hsp) when K must be copied
  alignas(64) float dK[kBt * kMaxHs];     // (Bk, hsp) dK / scale
  alignas(64) float dV[kBt * kMaxHs];     // (Bk, hsp)
  alignas(64) float Qbuf[kBt * kMaxHs];   // (Bq, hsp) when Q must be copied
  alignas(64) float dObuf[kBt * kMaxHs];  // (Bq, hsp) when dO must be copied
  alignas(64) float dQ[kBt * kMaxHs];     // (Bq, hsp) this key tile's dq / scale
  alignas(64) float P[kBt * kBt];         // (Bq, Bk) probabilities
  alignas(64) float dS[kBt * kBt];        // (Bq, Bk) dP, then dS = dL/dS (S scaled scores)
  alignas(64) float Lse[kBt], D[kBt];     // (Bq)
  const vf lane = iota();
  for (int kt = 0; kt < nt; ++kt) {
    const int k0 = kt * kBt, nk = std::min(kBt, d.T - k0), nk_pad = round_up(nk, kW);
    const E* kv = qkv + size_t(k0) * C3 + d.C + h * hs;
    for (int j = 0; j < nk_pad; ++j)
      for (int c = 0; c < hs; ++c) {
        Kt[c * kBt + j] = j < nk ? d.scale * elem(kv[size_t(j) * C3 + c]) : 0.0f;
        Vt[c * kBt + j] = j < nk ? elem(kv[size_t(j) * C3 + d.C + c]) : 0.0f;
      }
    const Rows K = rows_view(Kbuf, kv, C3, nk, nk_pad, hs, hsp);
    std::fill(dK, dK + nk_pad * hsp, 0.0f);
    std::fill(dV, dV + nk_pad * hsp, 0.0f);
    for (int qt = kt; qt < nt; ++qt) {
      const int q0 = qt * kBt, nq = std::min(kBt, d.T - q0), nq_pad = round_up(nq, kW);
      const bool diag = qt == kt;
      const Rows Q = rows_view(Qbuf, qkv + size_t(q0) * C3 + h * hs, C3, nq, nq_pad, hs, hsp);
      const Rows dO = rows_view(dObuf, dout + size_t(q0) * d.C + h * hs, d.C, nq, nq_pad, hs, hsp);
      for (int i = 0; i < nq_pad; ++i) {
        // D_i = dO_i . O_i (= sum_j P_ij dP_ij); padded rows get P = exp(-inf) = 0.
        const E* o = out + size_t(q0 + i) * d.C + h * hs;
        vf dot = {};
        for (int c = 0; i < nq && c < hs; c += kW)
          dot = fma(load(dO.p + i * dO.ld + c),
                    c + kW <= hs ? load(o + c) : load_partial(o + c, hs - c), dot);
        D[i] = hsum(dot);
        Lse[i] = i < nq ? lse[q0 + i] : INFINITY;
      }
      // S (Bq,Bk) = Q (Bq,hs) (scale K)^T (hs,Bk); P = exp(S - lse)
      tile_gemm(nq_pad, nk_pad, hs, Q.p, Q.ld, 1, Kt, kBt, P, kBt, false,
                diag ? Causal::kColsUpToRow : Causal::kNone);
      for (int i = 0; i < nq_pad; ++i) {
        // On the diagonal, row i is read only up to the vector holding column i.
        const int j_end = diag ? i / kW * kW + kW : nk_pad;
        for (int c = 0; c < j_end; c += kW) {
          vf p = vexp(load(P + i * kBt + c) - Lse[i]);
          if (diag) p = lane + float(c) <= splat(float(i)) ? p : vf{};
          store(P + i * kBt + c, p);
        }
      }
      // dV (Bk,hsp) += P^T (Bk,Bq) dO (Bq,hsp)
      tile_gemm(nk_pad, hsp, nq_pad, P, 1, kBt, dO.p, dO.ld, dV, hsp, true,
                diag ? Causal::kKFromRow : Causal::kNone);
      // dP (Bq,Bk) = dO (Bq,hs) V^T (hs,Bk); dS = P (dP - D)
      tile_gemm(nq_pad, nk_pad, hs, dO.p, dO.ld, 1, Vt, kBt, dS, kBt, false,
                diag ? Causal::kColsUpToRow : Causal::kNone);
      for (int i = 0; i < nq_pad; ++i) {
        const int j_end = diag ? i / kW * kW + kW : nk_pad;
        for (int c = 0; c < j_end; c += kW)
          store(dS + i * kBt + c, load(P + i * kBt + c) * (load(dS + i * kBt + c) - D[i]));
      }
      // dK (Bk,hsp) += dS^T (Bk,Bq) Q (Bq,hsp)
      tile_gemm(nk_pad, hsp, nq_pad, dS, 1, kBt, Q.p, Q.ld, dK, hsp, true,
                diag ? Causal::kKFromRow : Causal::kNone);
      // dQ (Bq,hsp) = dS (Bq,Bk) K (Bk,hsp), into dqkv: "=" from the first
      // key tile, "+=" after, always in key-tile order (deterministic).
      tile_gemm(nq_pad, hsp, nk_pad, dS, kBt, 1, K.p, K.ld, dQ, hsp, false,
                diag ? Causal::kKUpToRow : Causal::kNone);
      if constexpr (sizeof(E) == 4)
        store_rows(dqkv + size_t(q0) * C3 + h * hs, C3, dQ, nq, hs, hsp, d.scale, kt > 0);
      else
        store_rows(dq_acc + size_t(q0) * hsp, hsp, dQ, nq, hsp, hsp, d.scale, kt > 0);
    }
    E* dkv = dqkv + size_t(k0) * C3 + d.C + h * hs;
    store_rows(dkv, C3, dK, nk, hs, hsp, d.scale, false);
    store_rows(dkv + d.C, C3, dV, nk, hs, hsp, 1.0f, false);
  }
  if constexpr (sizeof(E) == 2)
    store_rows(dqkv + h * hs, C3, dq_acc, d.T, hs, hsp, 1.0f, false);
}

template <typename E>
void forward(E* out, float* lse, const E* qkv, int B, int T, int C, int NH) {
  const Dims d(T, C, NH);
  const int nt = (T + kBt - 1) / kBt;
#pragma omp parallel for collapse(3) schedule(dynamic, 1)
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < NH; ++h)
      for (int t = 0; t < nt; ++t)  // longest query tiles (most key tiles) first
        forward_tile(out + size_t(b) * T * C, lse + (size_t(b) * NH + h) * T,
                     qkv + size_t(b) * T * 3 * C, d, h, nt - 1 - t);
}

template <typename E>
void backward(E* dqkv, const float* dout, const E* qkv, const E* out, const float* lse, int B,
              int T, int C, int NH) {
  const Dims d(T, C, NH);
#pragma omp parallel for collapse(2) schedule(dynamic, 1)
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < NH; ++h) {
      const size_t bt = size_t(b) * T;
      // bf16: the dQ accumulator, (T, hsp) floats (too large for the stack at long T)
      float* dq_acc = sizeof(E) == 2 ? thread_scratch<0>(size_t(T) * d.hsp) : nullptr;
      backward_head(dqkv + bt * 3 * C, dout + bt * C, qkv + bt * 3 * C, out + bt * C,
                    lse + (size_t(b) * NH + h) * T, d, h, dq_acc);
    }
}

}  // namespace

void attention_forward(float* out, float* lse, const float* qkv, int B, int T, int C, int NH) {
  forward(out, lse, qkv, B, T, C, NH);
}
void attention_forward_bf16(bf16* out, float* lse, const bf16* qkv, int B, int T, int C, int NH) {
  forward(out, lse, qkv, B, T, C, NH);
}
void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* out,
                        const float* lse, int B, int T, int C, int NH) {
  backward(dqkv, dout, qkv, out, lse, B, T, C, NH);
}
void attention_backward_bf16(bf16* dqkv, const float* dout, const bf16* qkv, const bf16* out,
                             const float* lse, int B, int T, int C, int NH) {
  backward(dqkv, dout, qkv, out, lse, B, T, C, NH);
}

}  // namespace crucible::kernels::CRUCIBLE_ISA
