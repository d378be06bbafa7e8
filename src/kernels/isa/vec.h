// Portable SIMD for the per-ISA kernels: GCC vector extensions whose width
// follows the ISA the file is compiled for (4 floats for generic x86-64 SSE2,
// 8 for AVX2, 16 for AVX-512), so one kernel source becomes three real
// vector implementations. Loads and stores are unaligned-safe. Tails that are
// not a multiple of kW go through load_partial/store_partial.
//
// bf16 tensors (core/dtype.h) load by widening (exact) and store rounded to
// nearest even, so a kernel templated on its element types is the f32
// kernel with bf16 memory: math and every sum stay f32.
#pragma once
#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "core/dtype.h"

#if defined(__AVX512F__)
#define CRUCIBLE_VEC_BYTES 64
#elif defined(__AVX2__)
#define CRUCIBLE_VEC_BYTES 32
#else
#define CRUCIBLE_VEC_BYTES 16
#endif

namespace crucible::kernels::CRUCIBLE_ISA {

typedef float vf __attribute__((vector_size(CRUCIBLE_VEC_BYTES)));
typedef int32_t vi __attribute__((vector_size(CRUCIBLE_VEC_BYTES)));
inline constexpr int kW = CRUCIBLE_VEC_BYTES / 4;

inline vf splat(float x) { return vf{} + x; }
inline vf load(const float* p) {
  vf v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store(float* p, vf v) { std::memcpy(p, &v, sizeof v); }
// First n (< kW) lanes from p, the rest `fill`.
inline vf load_partial(const float* p, int n, float fill = 0.0f) {
  vf v = splat(fill);
  for (int i = 0; i < n; ++i) v[i] = p[i];
  return v;
}
inline void store_partial(float* p, vf v, int n) {
  for (int i = 0; i < n; ++i) p[i] = v[i];
}
inline float hsum(vf v) {
  float s = 0;
  for (int i = 0; i < kW; ++i) s += v[i];
  return s;
}
inline float hmax(vf v) {
  float s = v[0];
  for (int i = 1; i < kW; ++i) s = v[i] > s ? v[i] : s;
  return s;
}
// dst[0..n) += src[0..n), any n.
inline void add_into(float* dst, const float* src, int n) {
  int c = 0;
  for (; c + kW <= n; c += kW) store(dst + c, load(dst + c) + load(src + c));
  if (c < n)
    store_partial(dst + c, load_partial(dst + c, n - c) + load_partial(src + c, n - c), n - c);
}

// A per-thread f32 scratch of at least n floats, grown once and reused: for
// f32 copies of bf16 rows too large for the stack (the only heap memory of
// the kernels). kSlot keeps the kernels that use one apart.
template <int kSlot>
inline float* thread_scratch(size_t n) {
  static thread_local std::vector<float> buf;
  if (buf.size() < n) buf.resize(n);
  return buf.data();
}

// ---- bf16 memory ----
typedef uint16_t vh __attribute__((vector_size(CRUCIBLE_VEC_BYTES / 2)));  // kW bf16
typedef uint32_t vu __attribute__((vector_size(CRUCIBLE_VEC_BYTES)));

inline vf widen(vh h) {
  vu u = __builtin_convertvector(h, vu) << 16;
  vf f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
// Round to nearest even; NaN stays a (quiet) NaN. AVX512_BF16 does it in one
// instruction (which also flushes f32 denormals, below 1.2e-38, to zero).
inline vh narrow(vf f) {
  vh h;
#if defined(__AVX512BF16__) && CRUCIBLE_VEC_BYTES == 64
  __m256bh r = _mm512_cvtneps_pbh(__m512(f));
  std::memcpy(&h, &r, sizeof h);
#else
  vu u;
  std::memcpy(&u, &f, sizeof u);
  vu rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  vu nan = (vu)((u & 0x7fffffffu) > 0x7f800000u);  // all ones where NaN
  h = __builtin_convertvector((nan & ((u >> 16) | 0x40u)) | (~nan & rounded), vh);
#endif
  return h;
}
inline vf load(const bf16* p) {
  vh h;
  std::memcpy(&h, p, sizeof h);
  return widen(h);
}
inline void store(bf16* p, vf v) {
  vh h = narrow(v);
  std::memcpy(p, &h, sizeof h);
}
inline vf load_partial(const bf16* p, int n, float fill = 0.0f) {
  vf v = splat(fill);
  for (int i = 0; i < n; ++i) v[i] = to_f32(p[i]);
  return v;
}
inline void store_partial(bf16* p, vf v, int n) {
  vh h = narrow(v);
  for (int i = 0; i < n; ++i) p[i].bits = h[i];
}
// Scalar element access for either type.
inline float elem(float x) { return x; }
inline float elem(bf16 x) { return to_f32(x); }
template <typename T>
inline T from_f32(float x) {
  if constexpr (sizeof(T) == 4)
    return x;
  else
    return to_bf16(x);
}

inline vf vmax(vf a, vf b) { return a > b ? a : b; }
inline vf vmin(vf a, vf b) { return a < b ? a : b; }
inline vf fma(vf a, vf b, vf c) { return a * b + c; }  // contracted to FMA where the ISA has it

// exp(x), ~2 ulp: range reduction x = n ln2 + r (ln2 split in two for
// accuracy), degree-6 polynomial for e^r on |r| <= ln2/2, then 2^n through the
// exponent bits. Inputs below -87.3 give 0 (what softmax wants), above 88.3 clamp.
inline vf vexp(vf x) {
  vf below = x < -87.3365447504f ? splat(0.0f) : splat(1.0f);
  x = vmax(vmin(x, splat(88.3762626647949f)), splat(-87.3365447504f));
  vf half = x >= 0 ? splat(0.5f) : splat(-0.5f);  // mask select via ?: on vectors
  vi ni = __builtin_convertvector(x * 1.44269504088896341f + half, vi);  // round to nearest
  vf nf = __builtin_convertvector(ni, vf);
  vf r = x - nf * 0.693359375f;
  r = r - nf * -2.12194440e-4f;
  vf p = splat(1.9875691500e-4f);
  p = fma(p, r, splat(1.3981999507e-3f));
  p = fma(p, r, splat(8.3334519073e-3f));
  p = fma(p, r, splat(4.1665795894e-2f));
  p = fma(p, r, splat(1.6666665459e-1f));
  p = fma(p, r, splat(5.0000001201e-1f));
  p = fma(p, r * r, r + 1.0f);
  vi bits = (ni + 127) << 23;
  vf scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale * below;
}

// tanh(x) = 1 - 2 / (exp(2x) + 1), saturating cleanly for large |x|.
inline vf vtanh(vf x) {
  vf e = vexp(vmin(x * 2.0f, splat(80.0f)));
  return 1.0f - 2.0f / (e + 1.0f);
}

}  // namespace crucible::kernels::CRUCIBLE_ISA
