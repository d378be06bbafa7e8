// The small GEMM inside attention's tiles, C (M,N) (+)= A (M,K) B (K,N), in
// two forms of one template, compiled per ISA (included by isa/attention.cc only):
//   tile_gemm<float>     f32 operands, one FMA per product;
//   tile_gemm<uint32_t>  bf16 operands in pairs along K, f32 accumulation: each
//                  step takes two products per lane, the shape of AVX512_BF16's
//                  vdpbf16ps (twice the f32 FMA rate). Where the CPU has it
//                  (the avx512bf16 table) that is the instruction; elsewhere
//                  dot2 does what it does with two FMAs, in its order, so the
//                  packing and tiling around it run, and are tested, on every
//                  CPU. A product of two bf16 is exact in f32, so each FMA
//                  rounds once, as the instruction does: the same bits, but
//                  for denormals, which the instruction flushes to zero.
// Both are register-tiled the same way: kMR rows of A broadcast against up to
// 3 vectors of a row of B, so each loaded vector feeds kMR FMAs (or dot2s).
// Their N side is vectorised, so the caller orients each product to put a
// contiguous, padded-to-kW dimension there.
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/isa/vec.h"

namespace crucible::kernels::CRUCIBLE_ISA {

// AVX-512 has 32 vector registers: 8 rows x 3 vectors of accumulators fit.
constexpr int kMR = kW == 16 ? 8 : 4;
static_assert(kMR % 2 == 0, "pairs along K must not straddle a micro-block's rows");

inline int round_up(int x, int m) { return (x + m - 1) / m * m; }

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

// Which part of a diagonal tile's product can be nonzero. Rows of the micro
// block are [r0, r0+kMR); all indices are local to the tile (q0 == k0).
enum class Causal {
  kNone,
  kColsUpToRow,  // C rows are queries, columns keys: only key <= query
  kColsFromRow,  // C rows are keys, columns queries: only query >= key
  kKUpToRow,     // rows queries, reduction over keys <= query
  kKFromRow,     // rows keys, reduction over queries >= key
};

// The micro-block's ranges [n_lo, n_hi) of C's columns and [k_lo, k_hi) of
// the reduction that `causal` leaves for rows [r0, r0+kMR).
struct Ranges {
  int n_lo, n_hi, k_lo, k_hi;
};
inline Ranges causal_ranges(Causal causal, int r0, int N, int K) {
  Ranges r{0, N, 0, K};
  if (causal == Causal::kColsUpToRow) r.n_hi = std::min(N, round_up(r0 + kMR, kW));
  if (causal == Causal::kColsFromRow) r.n_lo = r0 / kW * kW;
  if (causal == Causal::kKUpToRow) r.k_hi = std::min(K, r0 + kMR);
  if (causal == Causal::kKFromRow) r.k_lo = r0;
  return r;
}

// 3 vectors where possible, but never a lone one (4 = 2+2): one vector gives
// too few accumulators to hide the FMA latency.
inline int vectors_to_take(int left) {
  const int nv = left / kW;
  return nv <= 2 ? nv : nv % 3 == 1 ? 2 : 3;
}

// ---- bf16 pairs ----
//
// A pair is one 32-bit word: the bf16 of the even index in the low half (the
// lower address), the odd one in the high half, as vdpbf16ps reads them.

inline vf bits_to_vf(vu u) {
  vf f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// c + a_odd * b_odd + a_even * b_even per lane, in that order.
inline vf dot2(vf c, vu a, vu b) {
#if defined(__AVX512BF16__) && CRUCIBLE_VEC_BYTES == 64
  __m512bh ah, bh;
  std::memcpy(&ah, &a, sizeof a);
  std::memcpy(&bh, &b, sizeof b);
  return vf(_mm512_dpbf16_ps(__m512(c), ah, bh));
#else
  const vu hi = vu{} + 0xffff0000u;
  c = fma(bits_to_vf(a & hi), bits_to_vf(b & hi), c);
  return fma(bits_to_vf(a << 16), bits_to_vf(b << 16), c);
#endif
}

inline vu load_words(const uint32_t* p) {
  vu v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store_words(uint32_t* p, vu v) { std::memcpy(p, &v, sizeof v); }
inline vu broadcast_word(const uint32_t* p) {
  uint32_t w;
  std::memcpy(&w, p, 4);
  return vu{} + w;
}

// Pairs from two vectors: lane i of the result holds (lo[i], hi[i]) rounded
// to bf16 (round to nearest even, as every bf16 store).
inline vu pair_words(vf lo, vf hi) {
  return __builtin_convertvector(narrow(lo), vu) | (__builtin_convertvector(narrow(hi), vu) << 16);
}
// The same from bf16 already: lane i of lo and of hi (kW bf16 each).
inline vu pair_words(const bf16* lo, const bf16* hi) {
  vh l, h;
  std::memcpy(&l, lo, sizeof l);
  std::memcpy(&h, hi, sizeof h);
  return __builtin_convertvector(l, vu) | (__builtin_convertvector(h, vu) << 16);
}

// ---- one micro-kernel for both ----
//
// W is the operand word: float (one element, one FMA per product) or
// uint32_t (a pair along K, one dot2 per two products).
inline vf load_b(const float* p) { return load(p); }
inline vu load_b(const uint32_t* p) { return load_words(p); }
inline vf broadcast_a(const float* p) { return broadcast(p); }
inline vu broadcast_a(const uint32_t* p) { return broadcast_word(p); }
inline vf multiply_add(vf c, vf a, vf b) { return fma(a, b, c); }
inline vf multiply_add(vf c, vu a, vu b) { return dot2(c, a, b); }

// C[m, 0:NR*kW) (+)= sum_k A(m,k) B[k, 0:NR*kW) for kMR rows m, words k in
// [k_lo, k_hi). A(m,k) = A[m*ars + k*acs], one word broadcast (so A may be
// read transposed); B's row k holds a word per lane: for pairs, lane n holds
// (B(2k,n), B(2k+1,n)).
template <int NR, typename W>
inline void micro_tile(int k_lo, int k_hi, const W* A, int ars, int acs, const W* Bm, int ldb,
                       float* Cm, int ldc, bool accumulate) {
  using vw = decltype(load_b(Bm));
  vf c[kMR][NR];
#pragma GCC unroll 8
  for (int m = 0; m < kMR; ++m)
#pragma GCC unroll 4
    for (int n = 0; n < NR; ++n) c[m][n] = accumulate ? load(Cm + m * ldc + n * kW) : vf{};
  const W* a = A + size_t(k_lo) * acs;
  const W* b = Bm + size_t(k_lo) * ldb;
  for (int k = k_lo; k < k_hi; ++k, a += acs, b += ldb) {
    vw bv[NR];
#pragma GCC unroll 4
    for (int n = 0; n < NR; ++n) bv[n] = load_b(b + n * kW);
#pragma GCC unroll 8
    for (int m = 0; m < kMR; ++m) {
      const vw av = broadcast_a(a + m * ars);
#pragma GCC unroll 4
      for (int n = 0; n < NR; ++n) c[m][n] = multiply_add(c[m][n], av, bv[n]);
    }
  }
#pragma GCC unroll 8
  for (int m = 0; m < kMR; ++m)
#pragma GCC unroll 4
    for (int n = 0; n < NR; ++n) store(Cm + m * ldc + n * kW, c[m][n]);
}

// C (M,N) (+)= A (M,K) B (K,N), ldc/ldb row strides in words; M a multiple
// of kMR, N of kW; K counts words (elements, or pairs: then K elements are
// 2K). Skips (or, for "=", zeroes) what `causal` says is zero: its ranges are
// in elements, and whole pairs since kMR is even.
template <typename W>
inline void tile_gemm(int M, int N, int K, const W* A, int ars, int acs, const W* Bm, int ldb,
                      float* Cm, int ldc, bool accumulate, Causal causal) {
  constexpr int per = std::is_same_v<W, float> ? 1 : 2;  // elements per word
  for (int r0 = 0; r0 < M; r0 += kMR) {
    const Ranges r = causal_ranges(causal, r0, N, per * K);
    const int k_lo = r.k_lo / per, k_hi = (r.k_hi + per - 1) / per;
    const W* a = A + size_t(r0) * ars;
    float* c = Cm + size_t(r0) * ldc;
    for (int c0 = r.n_lo; c0 < r.n_hi;) {
      const int take = vectors_to_take(r.n_hi - c0);
      if (take == 3) micro_tile<3>(k_lo, k_hi, a, ars, acs, Bm + c0, ldb, c + c0, ldc, accumulate);
      if (take == 2) micro_tile<2>(k_lo, k_hi, a, ars, acs, Bm + c0, ldb, c + c0, ldc, accumulate);
      if (take == 1) micro_tile<1>(k_lo, k_hi, a, ars, acs, Bm + c0, ldb, c + c0, ldc, accumulate);
      c0 += take * kW;
    }
  }
}

}  // namespace crucible::kernels::CRUCIBLE_ISA
