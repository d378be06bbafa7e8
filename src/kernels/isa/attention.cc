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
// bf16 comes in two forms (table.cc picks one). Widened: bf16 loads become
// f32 tiles and the f32 micro-kernel runs. Pairs (dot = true): every product
// takes bf16 pairs along its reduction, tile_gemm<uint32_t>, which is
// vdpbf16ps on AVX512_BF16 (two products per f32 lane per instruction); q,
// k, v are packed into pairs as each product needs them (along hs, or across
// rows when the product reduces over keys or queries), and P, dO and dS are
// rounded to bf16 as they are formed, as FlashAttention-2 does in bf16. The
// softmax statistics, D, dS's arithmetic and every sum stay f32.
//
// Threads: forward over (b, h, query tile); backward over (b, h), each pair
// owning its columns of dqkv, and dQ summed over key tiles in a fixed order,
// so results are bitwise independent of the thread count.
//
// Stack: the tiles are sized for hs <= kMaxHs, about 136 KB per thread in
// forward and 264 KB in backward (the pairs form: ~90 and ~255 KB); OpenMP's default worker stacks
// (MBs) hold that. kBt = 32 keeps that small; 48 and 64 measured no faster on AVX2.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/check.h"
#include "kernels/isa/isa.h"
#include "kernels/isa/tile_gemm.h"
#include "kernels/isa/vec.h"

namespace crucible::kernels::CRUCIBLE_ISA {
namespace {

constexpr int kBt = 32;      // tile edge in queries and keys (multiple of kW and kMR)
constexpr int kMaxHs = 256;  // bound of the stack tiles: 32 KB each at hs 256
static_assert(kBt % kW == 0 && kW % kMR == 0, "tiles must split into micro-blocks");

inline vf iota() {
  vf v;
  for (int i = 0; i < kW; ++i) v[i] = float(i);
  return v;
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

struct Dims {
  int T, C, hs, hsp;
  float scale;
  Dims(int T_, int C_, int NH) : T(T_), C(C_), hs(C_ / NH) {
    CRUCIBLE_CHECK(C % NH == 0 && hs <= kMaxHs, "[attention] need hs = C/NH <= 256");
    hsp = round_up(hs, kW);
    scale = 1.0f / std::sqrt(float(hs));
  }
};

// ---- bf16 pairs for tile_gemm<uint32_t> ----

inline uint32_t pair(bf16 lo, bf16 hi) { return lo.bits | uint32_t(hi.bits) << 16; }

// A block of rows of one head as pairs along hs: row r at p + r * ld words,
// hp = ceil(hs/2) pairs readable, the high half of an odd hs's last one zero.
struct Words {
  const uint32_t* p;
  int ld;
};

// Rows [0, n) of src (row stride src_ld bf16), zero rows up to n_pad. Read in
// place when that is safe (hs even, no padding rows), else copied into buf
// (n_pad, hp).
inline Words pairs_along_hs(uint32_t* buf, const bf16* src, size_t src_ld, int n, int n_pad,
                            int hs) {
  const int hp = (hs + 1) / 2;
  if (hs % 2 == 0 && n == n_pad) return {reinterpret_cast<const uint32_t*>(src), int(src_ld / 2)};
  for (int r = 0; r < n_pad; ++r)
    for (int kp = 0; kp < hp; ++kp) {
      const bf16* x = src + r * src_ld + 2 * kp;
      buf[r * hp + kp] = r >= n ? 0 : pair(x[0], 2 * kp + 1 < hs ? x[1] : bf16{});
    }
  return {buf, hp};
}

// The same, transposed: dst (hp, kBt), dst[kp * kBt + r] = pair kp of row r.
inline void pairs_transposed(uint32_t* dst, const bf16* src, size_t src_ld, int n, int n_pad,
                             int hs) {
  const int hp = (hs + 1) / 2;
  if (hs % 2 == 0) {  // a row's pairs are its words: a 32-bit transpose
    for (int r = 0; r < n_pad; ++r) {
      const bf16* x = src + r * src_ld;
      for (int kp = 0; kp < hp; ++kp) {
        uint32_t w = 0;
        if (r < n) std::memcpy(&w, x + 2 * kp, 4);
        dst[kp * kBt + r] = w;
      }
    }
    return;
  }
  for (int r = 0; r < n_pad; ++r) {
    const bf16* x = src + r * src_ld;
    for (int kp = 0; kp < hp; ++kp)
      dst[kp * kBt + r] = r >= n ? 0 : pair(x[2 * kp], 2 * kp + 1 < hs ? x[2 * kp + 1] : bf16{});
  }
}

// Pairs across rows: dst (n_pad/2, hsp), lane c of row kp holding column c of
// rows 2kp and 2kp+1 of src; zero past row n and column hs. n_pad is even.
inline void pairs_across_rows(uint32_t* dst, const bf16* src, size_t src_ld, int n, int n_pad,
                              int hs, int hsp) {
  for (int kp = 0; kp < n_pad / 2; ++kp) {
    const int r = 2 * kp;
    const bf16* lo = src + r * src_ld;
    const bf16* hi = lo + src_ld;
    int c = 0;
    if (r + 1 < n)
      for (; c + kW <= hs; c += kW) store_words(dst + kp * hsp + c, pair_words(lo + c, hi + c));
    for (; c < hsp; ++c)
      dst[kp * hsp + c] = c >= hs || r >= n ? 0 : pair(lo[c], r + 1 < n ? hi[c] : bf16{});
  }
}

// One query tile [q0, q0+nq) of head h.
//   qkv (T,3C) and out (T,C) point at the batch row; lse (T) at (b,h).
// bf16 runs both products in pairs (tile_gemm<uint32_t>): S^T from q and k as they
// are stored, the score scale applied to S; P rounded to bf16 for P V, as
// FlashAttention-2 does, while l and lse sum the f32 p.
template <typename E, bool dot>
void forward_tile(E* out, float* lse, const E* qkv, const Dims& d, int h, int qt) {
  static_assert(!dot || sizeof(E) == 2, "pairs are bf16");
  constexpr int kF = dot ? 1 : kBt * kMaxHs, kD = dot ? kBt * kMaxHs / 2 : 1;
  const int hs = d.hs, hsp = d.hsp, hp = (hs + 1) / 2, C3 = 3 * d.C;
  const int q0 = qt * kBt, nq = std::min(kBt, d.T - q0), nq_pad = round_up(nq, kW);
  const float s_scale = dot ? d.scale : 1.0f;  // f32: the scale rides on Qt
  alignas(64) float Qt[kF];                    // (hs, Bq) scale * q, transposed; zero past nq
  alignas(64) float Kbuf[kF];                  // (Bk, hsp) when K must be copied
  alignas(64) float Vbuf[kF];                  // (Bk, hsp) when V must be copied
  alignas(64) uint32_t Qw[kD];                 // (hp, Bq) pairs of q, transposed; zero past nq
  alignas(64) uint32_t Kw[kD];                 // (Bk, hp) pairs of k when K must be copied
  alignas(64) uint32_t Vw[kD];                 // (Bk/2, hsp) pairs of v across keys
  alignas(64) uint32_t Pw[dot ? kBt * kBt / 2 : 1];  // (Bk/2, Bq) pairs of p across keys
  alignas(64) float St[kBt * kBt];                   // (Bk, Bq) scores, then probabilities
  alignas(64) float acc[kBt * kMaxHs];               // (Bq, hsp) unnormalised output
  alignas(64) float m[kBt], l[kBt], corr[kBt];       // (Bq) running max, sum, rescale
  if constexpr (dot)
    pairs_transposed(Qw, qkv + size_t(q0) * C3 + h * hs, C3, nq, nq_pad, hs);
  else
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
    Rows V{};
    // S^T (Bk,Bq) = K (Bk,hs) Q^T (hs,Bq)
    if constexpr (dot) {
      const Words K = pairs_along_hs(Kw, kv, C3, nk, nk_pad, hs);
      pairs_across_rows(Vw, kv + d.C, C3, nk, nk_pad, hs, hsp);
      tile_gemm(nk_pad, nq_pad, hp, K.p, K.ld, 1, Qw, kBt, St, kBt, false,
                diag ? Causal::kColsFromRow : Causal::kNone);
    } else {
      const Rows K = rows_view(Kbuf, kv, C3, nk, nk_pad, hs, hsp);
      V = rows_view(Vbuf, kv + d.C, C3, nk, nk_pad, hs, hsp);
      tile_gemm(nk_pad, nq_pad, hs, K.p, K.ld, 1, Qt, kBt, St, kBt, false,
                diag ? Causal::kColsFromRow : Causal::kNone);
    }
    // Online softmax down each column: kW queries at a time over the keys.
    for (int cv = 0; cv < nq_pad; cv += kW) {
      const vf qi = lane + float(cv);
      // On the diagonal no query of this vector sees a key past cv + kW - 1
      // (j_end is even: nk_pad and cv are multiples of kW).
      const int j_end = diag ? std::min(nk_pad, cv + kW) : nk_pad;
      vf mx = splat(-INFINITY);
      for (int j = 0; j < j_end; ++j) {
        vf s = load(St + j * kBt + cv) * s_scale;
        if (diag) s = qi >= splat(float(j)) ? s : splat(-INFINITY);
        mx = vmax(mx, s);
      }
      const vf m_old = load(m + cv), m_new = vmax(m_old, mx);
      vf sum = {};
      for (int j = 0; j < j_end; j += 2) {
        vf p0 = vexp(load(St + j * kBt + cv) * s_scale - m_new);
        vf p1 = vexp(load(St + (j + 1) * kBt + cv) * s_scale - m_new);
        if (diag) {
          p0 = qi >= splat(float(j)) ? p0 : vf{};
          p1 = qi >= splat(float(j + 1)) ? p1 : vf{};
        }
        sum += p0;
        sum += p1;
        if constexpr (dot) {
          store_words(Pw + j / 2 * kBt + cv, pair_words(p0, p1));
        } else {
          store(St + j * kBt + cv, p0);
          store(St + (j + 1) * kBt + cv, p1);
        }
      }
      const vf c = vexp(m_old - m_new);  // exp(-inf) = 0 on the first tile
      store(l + cv, load(l + cv) * c + sum);
      store(m + cv, m_new);
      store(corr + cv, c);
    }
    for (int i = 0; i < nq_pad; ++i)
      for (int c = 0; c < hsp; c += kW) store(acc + i * hsp + c, load(acc + i * hsp + c) * corr[i]);
    // acc (Bq,hsp) += P (Bq,Bk) V (Bk,hsp), P read transposed out of S^T
    if constexpr (dot)
      tile_gemm(nq_pad, hsp, nk_pad / 2, Pw, 1, kBt, Vw, hsp, acc, hsp, true,
                diag ? Causal::kKUpToRow : Causal::kNone);
    else
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
// K^T for S (bf16: on S) and is applied to dK and dQ as they are stored.
// bf16 runs all five products in pairs (tile_gemm<uint32_t>), as FlashAttention-2
// does in bf16: S from q and k as stored; dO rounded to bf16 once per query
// tile (D takes it too), and P and dS rounded as they are formed, each used as the product
// needs it (pairs across rows or along them). D, P's exponent and dS's
// arithmetic stay f32, as do the sums of dK, dV and dQ.
//   qkv, dqkv (T,3C); dout, out (T,C) point at the batch row; lse (T) at (b,h)
//   dq_acc (T, hsp): bf16 only, dQ summed over key tiles in f32, rounded once
template <typename E, bool dot>
void backward_head(E* dqkv, const float* dout, const E* qkv, const E* out, const float* lse,
                   const Dims& d, int h, float* dq_acc) {
  static_assert(!dot || sizeof(E) == 2, "pairs are bf16");
  constexpr int kF = dot ? 1 : kBt * kMaxHs, kD = dot ? kBt * kMaxHs / 2 : 1;
  constexpr int kP = dot ? kBt * kBt / 2 : 1;
  const int hs = d.hs, hsp = d.hsp, hp = (hs + 1) / 2, C3 = 3 * d.C, nt = (d.T + kBt - 1) / kBt;
  const float s_scale = dot ? d.scale : 1.0f;
  alignas(64) float Kt[kF];                      // (hs, Bk) scale * k, transposed
  alignas(64) float Vt[kF];                      // (hs, Bk) v transposed
  alignas(64) float Kbuf[kF];                    // (Bk, hsp) when K must be copied
  alignas(64) float Qbuf[kF];                    // (Bq, hsp) when Q must be copied
  alignas(64) uint32_t Ktw[kD];                  // (hp, Bk) pairs of k along hs, transposed
  alignas(64) uint32_t Vtw[kD];                  // (hp, Bk) pairs of v along hs, transposed
  alignas(64) uint32_t Kw[kD];                   // (Bk/2, hsp) pairs of k across keys
  alignas(64) uint32_t Qhs[kD];                  // (Bq, hp) pairs of q along hs when copied
  alignas(64) uint32_t Qw[kD];                   // (Bq/2, hsp) pairs of q across queries
  alignas(64) uint32_t dOw[kD];                  // (Bq/2, hsp) pairs of bf16(dO) across queries
  alignas(64) bf16 dOh[dot ? kBt * kMaxHs : 1];  // (Bq, hsp) bf16(dO): pairs along hs
  alignas(64) uint32_t Ptw[kP];                  // (Bq/2, Bk) pairs of p across queries
  alignas(64) uint32_t dStw[kP];                 // (Bq/2, Bk) pairs of dS across queries
  alignas(64) bf16 dSh[dot ? kBt * kBt : 1];     // (Bq, Bk) bf16(dS): pairs along keys
  alignas(64) float dK[kBt * kMaxHs];            // (Bk, hsp) dK / scale
  alignas(64) float dV[kBt * kMaxHs];            // (Bk, hsp)
  alignas(64) float dObuf[kBt * kMaxHs];         // (Bq, hsp) when dO must be copied
  alignas(64) float dQ[kBt * kMaxHs];            // (Bq, hsp) this key tile's dq / scale
  alignas(64) float P[kBt * kBt];                // (Bq, Bk) probabilities
  alignas(64) float dS[kBt * kBt];               // (Bq, Bk) dP, then dS = dL/dS (S scaled scores)
  alignas(64) float Lse[kBt], D[kBt];            // (Bq)
  const vf lane = iota();
  for (int kt = 0; kt < nt; ++kt) {
    const int k0 = kt * kBt, nk = std::min(kBt, d.T - k0), nk_pad = round_up(nk, kW);
    const E* kv = qkv + size_t(k0) * C3 + d.C + h * hs;
    Rows K{};
    if constexpr (dot) {
      pairs_transposed(Ktw, kv, C3, nk, nk_pad, hs);
      pairs_transposed(Vtw, kv + d.C, C3, nk, nk_pad, hs);
      pairs_across_rows(Kw, kv, C3, nk, nk_pad, hs, hsp);
    } else {
      for (int j = 0; j < nk_pad; ++j)
        for (int c = 0; c < hs; ++c) {
          Kt[c * kBt + j] = j < nk ? d.scale * elem(kv[size_t(j) * C3 + c]) : 0.0f;
          Vt[c * kBt + j] = j < nk ? elem(kv[size_t(j) * C3 + d.C + c]) : 0.0f;
        }
      K = rows_view(Kbuf, kv, C3, nk, nk_pad, hs, hsp);
    }
    std::fill(dK, dK + nk_pad * hsp, 0.0f);
    std::fill(dV, dV + nk_pad * hsp, 0.0f);
    for (int qt = kt; qt < nt; ++qt) {
      const int q0 = qt * kBt, nq = std::min(kBt, d.T - q0), nq_pad = round_up(nq, kW);
      const bool diag = qt == kt;
      const E* q = qkv + size_t(q0) * C3 + h * hs;
      const Rows dO = rows_view(dObuf, dout + size_t(q0) * d.C + h * hs, d.C, nq, nq_pad, hs, hsp);
      if constexpr (dot)  // dO's padding (rows, columns) is zero already
        for (int i = 0; i < nq_pad; ++i)
          for (int c = 0; c < hsp; c += kW) store(dOh + i * hsp + c, load(dO.p + i * dO.ld + c));
      for (int i = 0; i < nq_pad; ++i) {
        // D_i = dO_i . O_i (= sum_j P_ij dP_ij, so bf16 takes the dO that dP
        // takes); padded rows get P = exp(-inf) = 0.
        const E* o = out + size_t(q0 + i) * d.C + h * hs;
        vf dd = {};
        for (int c = 0; i < nq && c < hs; c += kW)
          dd = fma(dot ? load(dOh + i * hsp + c) : load(dO.p + i * dO.ld + c),
                   c + kW <= hs ? load(o + c) : load_partial(o + c, hs - c), dd);
        D[i] = hsum(dd);
        Lse[i] = i < nq ? lse[q0 + i] : INFINITY;
      }
      // S (Bq,Bk) = Q (Bq,hs) (scale K)^T (hs,Bk); P = exp(S - lse)
      Rows Q{};
      if constexpr (dot) {
        const Words Qp = pairs_along_hs(Qhs, q, C3, nq, nq_pad, hs);
        tile_gemm(nq_pad, nk_pad, hp, Qp.p, Qp.ld, 1, Ktw, kBt, P, kBt, false,
                  diag ? Causal::kColsUpToRow : Causal::kNone);
        pairs_across_rows(Qw, q, C3, nq, nq_pad, hs, hsp);
        pairs_across_rows(dOw, dOh, hsp, nq_pad, nq_pad, hsp, hsp);
      } else {
        Q = rows_view(Qbuf, q, C3, nq, nq_pad, hs, hsp);
        tile_gemm(nq_pad, nk_pad, hs, Q.p, Q.ld, 1, Kt, kBt, P, kBt, false,
                  diag ? Causal::kColsUpToRow : Causal::kNone);
      }
      // Rows i and i+1 together (nq_pad is even), so bf16 keeps their pairs.
      // On the diagonal, a row is read only up to the vector holding its
      // column (the same vector for both rows: kW is even).
      for (int i = 0; i < nq_pad; i += 2) {
        const int j_end = diag ? i / kW * kW + kW : nk_pad;
        for (int c = 0; c < j_end; c += kW) {
          vf p0 = vexp(load(P + i * kBt + c) * s_scale - Lse[i]);
          vf p1 = vexp(load(P + (i + 1) * kBt + c) * s_scale - Lse[i + 1]);
          if (diag) {
            p0 = lane + float(c) <= splat(float(i)) ? p0 : vf{};
            p1 = lane + float(c) <= splat(float(i + 1)) ? p1 : vf{};
          }
          store(P + i * kBt + c, p0);
          store(P + (i + 1) * kBt + c, p1);
          if constexpr (dot) store_words(Ptw + i / 2 * kBt + c, pair_words(p0, p1));
        }
      }
      // dV (Bk,hsp) += P^T (Bk,Bq) dO (Bq,hsp)
      // dP (Bq,Bk) = dO (Bq,hs) V^T (hs,Bk)
      if constexpr (dot) {
        tile_gemm(nk_pad, hsp, nq_pad / 2, Ptw, 1, kBt, dOw, hsp, dV, hsp, true,
                  diag ? Causal::kKFromRow : Causal::kNone);
        tile_gemm(nq_pad, nk_pad, hp, reinterpret_cast<const uint32_t*>(dOh), hsp / 2, 1, Vtw, kBt,
                  dS, kBt, false, diag ? Causal::kColsUpToRow : Causal::kNone);
      } else {
        tile_gemm(nk_pad, hsp, nq_pad, P, 1, kBt, dO.p, dO.ld, dV, hsp, true,
                  diag ? Causal::kKFromRow : Causal::kNone);
        tile_gemm(nq_pad, nk_pad, hs, dO.p, dO.ld, 1, Vt, kBt, dS, kBt, false,
                  diag ? Causal::kColsUpToRow : Causal::kNone);
      }
      // dS = P (dP - D)
      for (int i = 0; i < nq_pad; i += 2) {
        const int j_end = diag ? i / kW * kW + kW : nk_pad;
        for (int c = 0; c < j_end; c += kW) {
          const vf s0 = load(P + i * kBt + c) * (load(dS + i * kBt + c) - D[i]);
          const vf s1 = load(P + (i + 1) * kBt + c) * (load(dS + (i + 1) * kBt + c) - D[i + 1]);
          if constexpr (dot) {
            store_words(dStw + i / 2 * kBt + c, pair_words(s0, s1));
            store(dSh + i * kBt + c, s0);
            store(dSh + (i + 1) * kBt + c, s1);
          } else {
            store(dS + i * kBt + c, s0);
            store(dS + (i + 1) * kBt + c, s1);
          }
        }
      }
      // dK (Bk,hsp) += dS^T (Bk,Bq) Q (Bq,hsp)
      // dQ (Bq,hsp) = dS (Bq,Bk) K (Bk,hsp), into dqkv: "=" from the first
      // key tile, "+=" after, always in key-tile order (deterministic).
      if constexpr (dot) {
        tile_gemm(nk_pad, hsp, nq_pad / 2, dStw, 1, kBt, Qw, hsp, dK, hsp, true,
                  diag ? Causal::kKFromRow : Causal::kNone);
        tile_gemm(nq_pad, hsp, nk_pad / 2, reinterpret_cast<const uint32_t*>(dSh), kBt / 2, 1, Kw,
                  hsp, dQ, hsp, false, diag ? Causal::kKUpToRow : Causal::kNone);
        store_rows(dq_acc + size_t(q0) * hsp, hsp, dQ, nq, hsp, hsp, d.scale, kt > 0);
      } else {
        tile_gemm(nk_pad, hsp, nq_pad, dS, 1, kBt, Q.p, Q.ld, dK, hsp, true,
                  diag ? Causal::kKFromRow : Causal::kNone);
        tile_gemm(nq_pad, hsp, nk_pad, dS, kBt, 1, K.p, K.ld, dQ, hsp, false,
                  diag ? Causal::kKUpToRow : Causal::kNone);
        if constexpr (sizeof(E) == 4)
          store_rows(dqkv + size_t(q0) * C3 + h * hs, C3, dQ, nq, hs, hsp, d.scale, kt > 0);
        else
          store_rows(dq_acc + size_t(q0) * hsp, hsp, dQ, nq, hsp, hsp, d.scale, kt > 0);
      }
    }
    E* dkv = dqkv + size_t(k0) * C3 + d.C + h * hs;
    store_rows(dkv, C3, dK, nk, hs, hsp, d.scale, false);
    store_rows(dkv + d.C, C3, dV, nk, hs, hsp, 1.0f, false);
  }
  if constexpr (sizeof(E) == 2) store_rows(dqkv + h * hs, C3, dq_acc, d.T, hs, hsp, 1.0f, false);
}

template <typename E, bool dot>
void forward(E* out, float* lse, const E* qkv, int B, int T, int C, int NH) {
  const Dims d(T, C, NH);
  const int nt = (T + kBt - 1) / kBt;
#pragma omp parallel for collapse(3) schedule(dynamic, 1)
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < NH; ++h)
      for (int t = 0; t < nt; ++t)  // longest query tiles (most key tiles) first
        forward_tile<E, dot>(out + size_t(b) * T * C, lse + (size_t(b) * NH + h) * T,
                             qkv + size_t(b) * T * 3 * C, d, h, nt - 1 - t);
}

template <typename E, bool dot>
void backward(E* dqkv, const float* dout, const E* qkv, const E* out, const float* lse, int B,
              int T, int C, int NH) {
  const Dims d(T, C, NH);
#pragma omp parallel for collapse(2) schedule(dynamic, 1)
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < NH; ++h) {
      const size_t bt = size_t(b) * T;
      // bf16: the dQ accumulator, (T, hsp) floats (too large for the stack at long T)
      float* dq_acc = sizeof(E) == 2 ? thread_scratch<0>(size_t(T) * d.hsp) : nullptr;
      backward_head<E, dot>(dqkv + bt * 3 * C, dout + bt * C, qkv + bt * 3 * C, out + bt * C,
                            lse + (size_t(b) * NH + h) * T, d, h, dq_acc);
    }
}

}  // namespace

// bf16 comes in two forms: widened to the f32 products, and in pairs
// (tile_gemm<uint32_t>). table.cc dispatches the pairs where vdpbf16ps does them
// (the avx512bf16 table, twice the f32 FMA rate) and the widened form
// elsewhere, which is as fast there as emulated pairs and rounds nothing but
// the storage; every table exports the pairs form for its tests.
void attention_forward(float* out, float* lse, const float* qkv, int B, int T, int C, int NH) {
  forward<float, false>(out, lse, qkv, B, T, C, NH);
}
void attention_forward_bf16(bf16* out, float* lse, const bf16* qkv, int B, int T, int C, int NH) {
  forward<bf16, false>(out, lse, qkv, B, T, C, NH);
}
void attention_forward_bf16_pairs(bf16* out, float* lse, const bf16* qkv, int B, int T, int C,
                                  int NH) {
  forward<bf16, true>(out, lse, qkv, B, T, C, NH);
}
void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* out,
                        const float* lse, int B, int T, int C, int NH) {
  backward<float, false>(dqkv, dout, qkv, out, lse, B, T, C, NH);
}
void attention_backward_bf16(bf16* dqkv, const float* dout, const bf16* qkv, const bf16* out,
                             const float* lse, int B, int T, int C, int NH) {
  backward<bf16, false>(dqkv, dout, qkv, out, lse, B, T, C, NH);
}
void attention_backward_bf16_pairs(bf16* dqkv, const float* dout, const bf16* qkv, const bf16* out,
                                   const float* lse, int B, int T, int C, int NH) {
  backward<bf16, true>(dqkv, dout, qkv, out, lse, B, T, C, NH);
}

}  // namespace crucible::kernels::CRUCIBLE_ISA
