// Portable SIMD for the per-ISA kernels: GCC vector extensions whose width
// follows the ISA the file is compiled for (4 floats for generic x86-64 SSE2,
// 8 for AVX2, 16 for AVX-512), so one kernel source becomes three real
// vector implementations. Loads and stores are unaligned-safe. Tails that are
// not a multiple of kW go through load_partial/store_partial.
#pragma once
#include <cstdint>
#include <cstring>

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
