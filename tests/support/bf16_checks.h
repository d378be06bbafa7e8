// Shared by the bf16 kernel tests (tests/kernels/bf16_kernels_test.cc: LayerNorm, GELU,
// attention and the checks themselves; bf16_loss_optim_test.cc: cross-entropy,
// conversion, AdamW): bf16 inputs, and the comparison of a bf16 output with its
// reference.
//
// Tolerances. bf16 keeps an 8-bit significand (7 stored bits): one correct
// rounding has relative error <= 2^-8 (half an ulp, at the bottom of a
// binade), and two correct roundings of values
// that differ only in their last f32 bits (the fast kernel's f32 result and
// the reference's) can land on neighbouring bf16 values, one ulp apart: at
// most 2^-8 relative, 2^-7 at the bottom of a binade. So a bf16 output is
// compared with its f32 kernel's tolerance (the one the f32 test uses) plus
// rtol 2^-7 (kBf16Rtol); f32 outputs (resid_out, mean, rstd, lse, losses,
// dbias, max, log_sum, p) with the f32 tolerances alone. rtol 2^-7 alone
// would let a wrong rounding mode through (truncation moves half the
// elements by one ulp), so bf16 outputs must also agree with the reference
// bit for bit on all but a few elements (kMaxFlipFraction, compare_bf16).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "kernels/kernels.h"
#include "support/kernel_harness.h"

namespace crucible::bf16check {

using testing::Compare;


// One bf16 ulp relative to the value it neighbours, at most (bottom of a binade).
constexpr double kBf16Rtol = 1.0 / 128;
// Of the elements where the f32 tolerance is relative (rtol |want| >= atol),
// those whose bits may differ from the reference's: 1% plus 2, so that tiny
// tensors are not flaky. There the f32 kernels are within ~1e-7 relative of
// the references (measured; their tests allow 1e-4), which crosses a bf16
// rounding boundary in ~1e-7 / 2^-8 = 3e-5 of the elements (at most 2
// elements of ~500 seen over 20 seeds); truncation, double rounding or
// rounding an input the reference does not round moves 10-50% of them. Elements below
// atol / rtol are left out: there the f32 kernels' error is absolute (GELU's
// saturated tail, sums that cancel) and many bf16 ulps wide.
constexpr double kMaxFlipFraction = 0.01;

inline std::vector<bf16> random_bf16(Rng& rng, size_t n, float lo = -1.0f, float hi = 1.0f) {
  const std::vector<float> f = testing::random_vector(rng, n, lo, hi);
  std::vector<bf16> h(n);
  for (size_t i = 0; i < n; ++i) h[i] = to_bf16(f[i]);
  return h;
}

inline std::vector<float> widen(const std::vector<bf16>& h) {
  std::vector<float> f(h.size());
  for (size_t i = 0; i < h.size(); ++i) f[i] = to_f32(h[i]);
  return f;
}

inline std::vector<bf16> narrow(const std::vector<float>& f) {
  std::vector<bf16> h(f.size());
  for (size_t i = 0; i < f.size(); ++i) h[i] = to_bf16(f[i]);
  return h;
}

inline uint32_t f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

inline float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline std::string where(const kernels::KernelTable& k, const testing::KernelShape& s) {
  std::string str = std::string("isa=") + k.isa + " shape=";
  for (size_t i = 0; i < s.size(); ++i) str += (i ? "x" : "") + std::to_string(s[i]);
  return str;
}

inline size_t count_flips(const std::vector<bf16>& got, const std::vector<bf16>& want) {
  size_t flips = 0;
  for (size_t i = 0; i < got.size(); ++i) flips += got[i].bits != want[i].bits;
  return flips;
}

inline void expect_same_bits(const std::string& ctx, const std::vector<bf16>& got,
                      const std::vector<bf16>& want) {
  ASSERT_EQ(got.size(), want.size()) << ctx;
  EXPECT_EQ(count_flips(got, want), 0u) << ctx << ": elements whose bits differ";
}

// Rounding disagreements where the f32 tolerance (atol, rtol) is relative:
// {elements that differ in their bits, elements considered}.
inline std::pair<size_t, size_t> rounding_flips(const std::vector<bf16>& got,
                                         const std::vector<bf16>& want, double atol, double rtol) {
  size_t flips = 0, considered = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (rtol * std::fabs(to_f32(want[i])) >= atol) {
      ++considered;
      flips += got[i].bits != want[i].bits;
    }
  return {flips, considered};
}

inline size_t allowed_flips(size_t considered) {
  return size_t(kMaxFlipFraction * double(considered)) + 2;
}

// A bf16 output against the reference's. Checks now what the harness's
// tolerance cannot see, that it is rounded as the reference rounds (see
// kMaxFlipFraction), and returns the Compare for the harness: the f32
// kernel's (atol, rtol) plus one bf16 ulp. (NaN, inf or zeros where the
// reference is not fail the harness: see Bf16Checks.)
inline Compare compare_bf16(const std::string& ctx, const std::string& what, const std::vector<bf16>& got,
                     const std::vector<bf16>& want, double atol, double rtol_f32) {
  EXPECT_EQ(got.size(), want.size()) << ctx << " " << what;
  if (got.size() == want.size()) {
    const auto [flips, considered] = rounding_flips(got, want, atol, rtol_f32);
    EXPECT_LE(flips, allowed_flips(considered))
        << ctx << " " << what << ": " << flips << " of " << considered
        << " elements rounded unlike the reference (replay with CRUCIBLE_TEST_SEED="
        << testing::test_seed() << ")";
  }
  return {what, widen(got), widen(want), atol, kBf16Rtol + rtol_f32};
}

// AVX512_BF16's VCVTNEPS2BF16 treats f32 denormals (|x| < 2^-126) as zero
// (DAZ) whatever MXCSR says, where to_bf16 rounds them; so for a denormal
// input a zero of the same sign is also correct. Everything else must be
// to_bf16's bits exactly.
inline bool rounds_like_to_bf16(float x, bf16 got) {
  if (got.bits == to_bf16(x).bits) return true;
  const uint32_t u = f32_bits(x);
  const bool denormal = (u & 0x7f800000u) == 0 && (u & 0x007fffffu) != 0;
  return denormal && got.bits == uint16_t((u >> 16) & 0x8000u);
}

}  // namespace crucible::bf16check
