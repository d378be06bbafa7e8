// The bf16-activation kernels (signatures.inc, "bf16 activations") against
// their references (kernels/ref/bf16_ref.cc: widen, run the f32 reference in
// double, round once) on every ISA this CPU runs, avx512bf16's native
// conversions included. bf16 inputs are drawn as floats and rounded with
// to_bf16; the same bits go to the fast kernel and to the reference. Shapes
// are odd on purpose: C not a multiple of 16, T not a multiple of the 32-key
// tile, V odd and V = 50304 with few rows, hs = 12, 24 and 64.
//
// Tolerances. bf16 keeps an 8-bit significand (7 stored bits): one correct
// rounding has relative error <= 2^-9, and two correct roundings of values
// that differ only in their last f32 bits (the fast kernel's f32 result and
// the reference's) can land on neighbouring bf16 values, one ulp apart: at
// most 2^-8 relative, 2^-7 at the bottom of a binade. So a bf16 output is
// compared with its f32 kernel's tolerance (the one the f32 test uses) plus
// rtol 2^-7 (kBf16Rtol); f32 outputs (resid_out, mean, rstd, lse, losses,
// dbias, max, log_sum, p) with the f32 tolerances alone. rtol 2^-7 alone
// would let a wrong rounding mode through (truncation moves half the
// elements by one ulp), so bf16 outputs must also agree with the reference
// bit for bit on all but a few elements (kMaxFlipFraction, compare_bf16).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "core/threads.h"
#include "kernels/reference.h"
#include "support/kernel_harness.h"

namespace crucible {
namespace {

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

std::vector<bf16> random_bf16(Rng& rng, size_t n, float lo = -1.0f, float hi = 1.0f) {
  const std::vector<float> f = testing::random_vector(rng, n, lo, hi);
  std::vector<bf16> h(n);
  for (size_t i = 0; i < n; ++i) h[i] = to_bf16(f[i]);
  return h;
}

std::vector<float> widen(const std::vector<bf16>& h) {
  std::vector<float> f(h.size());
  for (size_t i = 0; i < h.size(); ++i) f[i] = to_f32(h[i]);
  return f;
}

std::vector<bf16> narrow(const std::vector<float>& f) {
  std::vector<bf16> h(f.size());
  for (size_t i = 0; i < f.size(); ++i) h[i] = to_bf16(f[i]);
  return h;
}

uint32_t f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

std::string where(const kernels::KernelTable& k, const testing::KernelShape& s) {
  std::string str = std::string("isa=") + k.isa + " shape=";
  for (size_t i = 0; i < s.size(); ++i) str += (i ? "x" : "") + std::to_string(s[i]);
  return str;
}

size_t count_flips(const std::vector<bf16>& got, const std::vector<bf16>& want) {
  size_t flips = 0;
  for (size_t i = 0; i < got.size(); ++i) flips += got[i].bits != want[i].bits;
  return flips;
}

void expect_same_bits(const std::string& ctx, const std::vector<bf16>& got,
                      const std::vector<bf16>& want) {
  ASSERT_EQ(got.size(), want.size()) << ctx;
  EXPECT_EQ(count_flips(got, want), 0u) << ctx << ": elements whose bits differ";
}

// Rounding disagreements where the f32 tolerance (atol, rtol) is relative:
// {elements that differ in their bits, elements considered}.
std::pair<size_t, size_t> rounding_flips(const std::vector<bf16>& got,
                                         const std::vector<bf16>& want, double atol, double rtol) {
  size_t flips = 0, considered = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (rtol * std::fabs(to_f32(want[i])) >= atol) {
      ++considered;
      flips += got[i].bits != want[i].bits;
    }
  return {flips, considered};
}

size_t allowed_flips(size_t considered) {
  return size_t(kMaxFlipFraction * double(considered)) + 2;
}

// A bf16 output against the reference's. Checks now what the harness's
// tolerance cannot see, that it is rounded as the reference rounds (see
// kMaxFlipFraction), and returns the Compare for the harness: the f32
// kernel's (atol, rtol) plus one bf16 ulp. (NaN, inf or zeros where the
// reference is not fail the harness: see Bf16Checks.)
Compare compare_bf16(const std::string& ctx, const std::string& what, const std::vector<bf16>& got,
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
bool rounds_like_to_bf16(float x, bf16 got) {
  if (got.bits == to_bf16(x).bits) return true;
  const uint32_t u = f32_bits(x);
  const bool denormal = (u & 0x7f800000u) == 0 && (u & 0x007fffffu) != 0;
  return denormal && got.bits == uint16_t((u >> 16) & 0x8000u);
}

// ---- LayerNorm ----

const std::vector<testing::KernelShape> kRowShapes = {{1, 1},   {1, 13},   {7, 67},  {33, 100},
                                                      {5, 257}, {64, 768}, {9, 1600}};

TEST(Bf16LayerNorm, ResidualForwardMatchesReference) {
  testing::check_kernel(
      "residual_layernorm_forward_bf16", kRowShapes,
      [](const kernels::KernelTable& k, const testing::KernelShape& s, Rng& rng) {
        const int N = s[0], C = s[1];
        const size_t n = size_t(N) * C;
        // The residual stream and the parameters stay f32; a is offset from 0
        // so the mean is not ~0.
        auto a = testing::random_vector(rng, n, 1.0f, 3.0f);
        auto b = testing::random_vector(rng, n);
        auto w = testing::random_vector(rng, C, 0.5f, 1.5f);
        auto bias = testing::random_vector(rng, C);
        std::vector<Compare> cmp;
        for (bool fused : {true, false}) {  // with b and resid_out, then with neither
          const std::string tag = fused ? "(a+b)" : "(a)";
          std::vector<float> resid(n), mean(N), rstd(N), resid_ref(n), mean_ref(N), rstd_ref(N);
          std::vector<bf16> out(n), out_ref(n);
          k.residual_layernorm_forward_bf16(fused ? resid.data() : nullptr, out.data(), mean.data(),
                                            rstd.data(), a.data(), fused ? b.data() : nullptr,
                                            w.data(), bias.data(), N, C);
          kernels::ref::residual_layernorm_forward_bf16(
              resid_ref.data(), out_ref.data(), mean_ref.data(), rstd_ref.data(), a.data(),
              fused ? b.data() : nullptr, w.data(), bias.data(), N, C);
          if (fused) cmp.push_back({"resid_out", resid, resid_ref, 0, 0});  // a + b is exact
          // The f32 test's tolerances (C = 1: variance 0, out carries half an
          // ulp of a + b times rstd ~ 316) plus one bf16 ulp.
          cmp.push_back(
              compare_bf16(where(k, s), "out" + tag, out, out_ref, C == 1 ? 5e-4 : 1e-5, 1e-4));
          cmp.push_back({"mean" + tag, mean, mean_ref, 1e-6, 1e-5});
          cmp.push_back({"rstd" + tag, rstd, rstd_ref, 1e-5, 1e-4});
        }
        return cmp;
      });
}

// ---- bias + GELU ----

TEST(Bf16BiasGelu, ForwardWithAndWithoutBiasMatchesReference) {
  testing::check_kernel(
      "bias_gelu_forward_bf16",
      {{1, 1}, {1, 13}, {7, 67}, {33, 100}, {5, 257}, {64, 768}, {17, 3072}},
      [](const kernels::KernelTable& k, const testing::KernelShape& s, Rng& rng) {
        const int N = s[0], C = s[1];
        const size_t n = size_t(N) * C;
        const auto pre0 = random_bf16(rng, n, -5.0f, 5.0f);
        const auto bias = testing::random_vector(rng, C);
        std::vector<Compare> cmp;
        for (bool with_bias : {true, false}) {
          const std::string tag = with_bias ? "(bias)" : "(no bias)";
          const float* b = with_bias ? bias.data() : nullptr;
          auto pre = pre0, pre_ref = pre0;
          std::vector<bf16> out(n), out_ref(n);
          k.bias_gelu_forward_bf16(out.data(), pre.data(), b, N, C);
          kernels::ref::bias_gelu_forward_bf16(out_ref.data(), pre_ref.data(), b, N, C);
          // pre + bias is one f32 add and one rounding on both sides: the
          // same bits (and with no bias, pre is left alone).
          expect_same_bits(where(k, s) + " pre" + tag, pre, with_bias ? pre_ref : pre0);
          cmp.push_back(compare_bf16(where(k, s), "out" + tag, out, out_ref, 1e-5, 1e-4));
        }
        return cmp;
      });
}

TEST(Bf16BiasGelu, BackwardAccumulatesBiasAndMatchesReference) {
  testing::check_kernel(
      "bias_gelu_backward_bf16",
      {{1, 1}, {1, 13}, {7, 67}, {33, 100}, {5, 257}, {64, 768}, {17, 3072}},
      [](const kernels::KernelTable& k, const testing::KernelShape& s, Rng& rng) {
        const int N = s[0], C = s[1];
        const size_t n = size_t(N) * C;
        const auto pre = random_bf16(rng, n, -6.0f, 6.0f);
        const auto dout = testing::random_vector(rng, n);  // an f32 GEMM output
        // dbias starts non-zero: the contract is "+=".
        auto dbias = testing::random_vector(rng, C), dbias_ref = dbias;
        std::vector<bf16> dpre(n), dpre_ref(n);
        k.bias_gelu_backward_bf16(dpre.data(), dbias.data(), dout.data(), pre.data(), N, C);
        kernels::ref::bias_gelu_backward_bf16(dpre_ref.data(), dbias_ref.data(), dout.data(),
                                              pre.data(), N, C);
        // dbias sums the unrounded f32 dpre on both sides: the f32 tolerance.
        return std::vector<Compare>{compare_bf16(where(k, s), "dpre", dpre, dpre_ref, 1e-5, 1e-4),
                                    {"dbias", dbias, dbias_ref, 1e-5, 1e-4}};
      });
}

// ---- attention ----

// Shapes (B, T, C, NH): T = 1, T not a multiple of the 32-key tile, T = 100
// and 130 spanning 4 and 5 key tiles (dQ summed over them); hs = 8, 12, 24, 64.
const std::vector<testing::KernelShape> kAttentionShapes = {
    {1, 1, 8, 1},     {2, 37, 72, 3}, {1, 70, 64, 1}, {2, 100, 72, 3},
    {1, 130, 192, 3}, {1, 65, 24, 2}, {2, 33, 128, 2}};

// Splits x (B,T,3C) into its q, k and v parts, each (B,T,C).
template <typename E>
std::vector<std::vector<E>> split_qkv(const std::vector<E>& x, int BT, int C) {
  std::vector<std::vector<E>> parts(3);
  for (int r = 0; r < BT; ++r)
    for (int p = 0; p < 3; ++p)
      parts[p].insert(parts[p].end(), x.begin() + (size_t(r) * 3 + p) * C,
                      x.begin() + (size_t(r) * 3 + p + 1) * C);
  return parts;
}

// The attention gradient as a kernel that reads `out` computes it, in
// double: D_i = dO_i . out_i from the out given, where ref::attention_backward
// recomputes D_i = sum_j P_ij dP_ij exactly and ignores out. With the exact
// out the two agree; with the bf16-rounded out the backward reads, D is off
// by dD_i = dO_i . (bf16(O_i) - O_i), up to 2^-9 sum_c |dO_ic O_ic|, and dQ_i
// by -scale dD_i sum_j P_ij k_j, dK_j by -scale sum_i P_ij dD_i q_i (dV does
// not use D): absolute errors of up to ~1e-3 at these shapes (hs 64), so
// many bf16 ulps of the smaller entries. That is the storage's effect, not
// the kernel's, so the kernel's dQ and dK are checked against this.
//   dqkv (B,T,3C) = ; dout, out (B,T,C) ; qkv (B,T,3C)
std::vector<float> attention_backward_reading_out(const std::vector<float>& dout,
                                                  const std::vector<float>& qkv,
                                                  const std::vector<float>& out, int B, int T,
                                                  int C, int NH) {
  const int hs = C / NH;
  const double scale = 1.0 / std::sqrt(double(hs));
  std::vector<double> d(qkv.size(), 0.0), p(T);
  auto at = [&](int b, int t, int part, int h) {
    return (size_t(b) * T + t) * 3 * C + part * C + h * hs;
  };
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < NH; ++h)
      for (int t = 0; t < T; ++t) {
        const float* q = &qkv[at(b, t, 0, h)];
        const float* dO = &dout[(size_t(b) * T + t) * C + h * hs];
        const float* O = &out[(size_t(b) * T + t) * C + h * hs];
        double mx = -INFINITY, sum = 0, D = 0;
        for (int j = 0; j <= t; ++j) {
          double sc = 0;
          for (int c = 0; c < hs; ++c) sc += double(q[c]) * qkv[at(b, j, 1, h) + c];
          mx = std::max(mx, p[j] = sc * scale);
        }
        for (int j = 0; j <= t; ++j) sum += (p[j] = std::exp(p[j] - mx));
        for (int c = 0; c < hs; ++c) D += double(dO[c]) * O[c];
        for (int j = 0; j <= t; ++j) {
          const double P = p[j] / sum;
          double dP = 0;
          for (int c = 0; c < hs; ++c) dP += double(dO[c]) * qkv[at(b, j, 2, h) + c];
          const double dS = P * (dP - D) * scale;
          for (int c = 0; c < hs; ++c) {
            d[at(b, t, 0, h) + c] += dS * qkv[at(b, j, 1, h) + c];
            d[at(b, j, 1, h) + c] += dS * q[c];
            d[at(b, j, 2, h) + c] += P * dO[c];
          }
        }
      }
  return std::vector<float>(d.begin(), d.end());
}

float max_abs(const std::vector<float>& x) {
  float m = 0;
  for (float v : x) m = std::max(m, std::fabs(v));
  return m;
}

TEST(Bf16Attention, ForwardAndBackwardMatchReference) {
  testing::check_kernel(
      "attention_bf16", kAttentionShapes,
      [](const kernels::KernelTable& k, const testing::KernelShape& s, Rng& rng) {
        const int B = s[0], T = s[1], C = s[2], NH = s[3];
        const size_t n = size_t(B) * T * C, nl = size_t(B) * NH * T;
        const auto qkv = random_bf16(rng, 3 * n);
        const auto dout = testing::random_vector(rng, n);  // an f32 GEMM output
        std::vector<bf16> out(n), out_ref(n);
        std::vector<float> lse(nl), lse_ref(nl);
        // dqkv starts as garbage: the contract is "=", not "+=".
        auto dqkv = random_bf16(rng, 3 * n, 5.0f, 9.0f);
        std::vector<bf16> dqkv_ref(3 * n);
        k.attention_forward_bf16(out.data(), lse.data(), qkv.data(), B, T, C, NH);
        k.attention_backward_bf16(dqkv.data(), dout.data(), qkv.data(), out.data(), lse.data(), B,
                                  T, C, NH);
        kernels::ref::attention_forward_bf16(out_ref.data(), lse_ref.data(), qkv.data(), B, T, C,
                                             NH);
        kernels::ref::attention_backward_bf16(dqkv_ref.data(), dout.data(), qkv.data(),
                                              out_ref.data(), lse_ref.data(), B, T, C, NH);
        // The test's own oracle, validated against the library's: with the
        // exact (f32) out both are the exact gradient.
        const auto qkv_f = widen(qkv);
        std::vector<float> out_f32(n), lse_f32(nl), dqkv_f32(3 * n);
        kernels::ref::attention_forward(out_f32.data(), lse_f32.data(), qkv_f.data(), B, T, C, NH);
        kernels::ref::attention_backward(dqkv_f32.data(), dout.data(), qkv_f.data(), out_f32.data(),
                                         lse_f32.data(), B, T, C, NH);
        const auto exact = attention_backward_reading_out(dout, qkv_f, out_f32, B, T, C, NH);
        const auto reading = attention_backward_reading_out(dout, qkv_f, widen(out), B, T, C, NH);
        const auto d = split_qkv(dqkv, B * T, C), d_ref = split_qkv(dqkv_ref, B * T, C),
                   d_reading = split_qkv(narrow(reading), B * T, C);
        const auto e = split_qkv(exact, B * T, C), r = split_qkv(reading, B * T, C);
        // The f32 attention test's tolerances, plus one bf16 ulp on bf16 outputs.
        std::vector<Compare> cmp = {compare_bf16(where(k, s), "out", out, out_ref, 2e-5, 2e-4),
                                    {"lse", lse, lse_ref, 2e-5, 2e-4},
                                    {"oracle dqkv (exact out)", exact, dqkv_f32, 2e-5, 2e-4},
                                    compare_bf16(where(k, s), "dv", d[2], d_ref[2], 2e-5, 2e-4)};
        const char* names[2] = {"dq", "dk"};
        for (int p = 0; p < 2; ++p) {
          // Against the oracle that reads the same bf16 out as the kernel.
          cmp.push_back(compare_bf16(where(k, s), std::string(names[p]) + " (D from stored out)",
                                     d[p], d_reading[p], 2e-5, 2e-4));
          // Against the library reference (exact D): apart by the out
          // rounding's effect, measured as reading - exact, plus both sides'
          // f32 tolerances.
          std::vector<float> effect(r[p].size());
          for (size_t i = 0; i < effect.size(); ++i) effect[i] = r[p][i] - e[p][i];
          cmp.push_back(compare_bf16(where(k, s), names[p], d[p], d_ref[p],
                                     2 * 2e-5 + max_abs(effect), 2e-4));
        }
        return cmp;
      });
}

// Each (b, h) is owned by one thread, with its own f32 dQ accumulator summed
// in key-tile order: the bits must not depend on the thread count.
TEST(Bf16Attention, BitwiseIndependentOfThreadCount) {
  const int B = 2, T = 100, C = 72, NH = 3;
  const size_t n = size_t(B) * T * C;
  Rng rng(testing::test_seed(), 93);
  const auto qkv = random_bf16(rng, 3 * n);
  const auto dout = testing::random_vector(rng, n);
  const int saved = num_threads();
  for (const kernels::KernelTable* k : kernels::supported_tables()) {
    std::vector<bf16> out[2], dqkv[2];
    std::vector<float> lse[2];
    for (int r = 0; r < 2; ++r) {
      set_num_threads(r == 0 ? 1 : 3);
      out[r].resize(n);
      lse[r].resize(size_t(B) * NH * T);
      dqkv[r].resize(3 * n);
      k->attention_forward_bf16(out[r].data(), lse[r].data(), qkv.data(), B, T, C, NH);
      k->attention_backward_bf16(dqkv[r].data(), dout.data(), qkv.data(), out[r].data(),
                                 lse[r].data(), B, T, C, NH);
    }
    expect_same_bits(std::string(k->isa) + " out", out[0], out[1]);
    EXPECT_TRUE(lse[0] == lse[1]) << k->isa << " lse";
    expect_same_bits(std::string(k->isa) + " dqkv", dqkv[0], dqkv[1]);
  }
  set_num_threads(saved);
}

// ---- softmax + cross-entropy ----

// Random targets, with every third row and the last ignored (targets -1
// and -100: any negative id).
std::vector<int32_t> targets_with_ignored(Rng& rng, int N, int V) {
  std::vector<int32_t> t(N);
  for (int i = 0; i < N; ++i) t[i] = int32_t(rng.next_u32() % uint32_t(V));
  for (int i = 2; i < N; i += 3) t[i] = -1;
  if (N > 1) t[N - 1] = -100;
  return t;
}

TEST(Bf16SoftmaxCrossEntropy, LossAndGradientMatchReference) {
  testing::check_kernel(
      "softmax_cross_entropy_bf16",
      {{1, 1}, {1, 7}, {3, 37}, {7, 100}, {5, 257}, {3, 1001}, {4, 50304}, {2, 50257}},
      [](const kernels::KernelTable& k, const testing::KernelShape& s, Rng& rng) {
        const int N = s[0], V = s[1];
        const auto x = random_bf16(rng, size_t(N) * V, -4.0f, 4.0f);
        const auto targets = targets_with_ignored(rng, N, V);
        std::vector<Compare> cmp;
        for (float dscale : {0.0f, 1.0f / N}) {
          const std::string tag = dscale == 0 ? "(loss only)" : "(with grad)";
          auto logits = x, logits_ref = x;
          std::vector<float> losses(N, 9.0f), losses_ref(N);
          k.softmax_cross_entropy_bf16(losses.data(), logits.data(), targets.data(), N, V, dscale);
          kernels::ref::softmax_cross_entropy_bf16(losses_ref.data(), logits_ref.data(),
                                                   targets.data(), N, V, dscale);
          cmp.push_back({"losses" + tag, losses, losses_ref, 1e-5, 1e-5});
          for (int i = 0; i < N; ++i) {
            EXPECT_TRUE(std::isfinite(losses[i])) << where(k, s) << tag;
            if (targets[i] < 0) {
              EXPECT_EQ(losses[i], 0.0f) << where(k, s) << " ignored row " << i;
            }
          }
          if (dscale == 0) {  // without a gradient the logits come back bit for bit
            expect_same_bits(where(k, s) + " logits" + tag, logits, x);
            continue;
          }
          // Gradient entries are ~1/(N V): the f32 test's absolute tolerance.
          cmp.push_back(
              compare_bf16(where(k, s), "dlogits" + tag, logits, logits_ref, 1e-7 / N, 1e-4));
          size_t nonzero_ignored = 0;  // +0 exactly, not -0 or a tiny value
          for (int i = 0; i < N; ++i)
            for (int v = 0; targets[i] < 0 && v < V; ++v)
              nonzero_ignored += logits[size_t(i) * V + v].bits != 0;
          EXPECT_EQ(nonzero_ignored, 0u) << where(k, s) << ": gradient in ignored rows";
        }
        return cmp;
      });
}

// The vocabulary-parallel halves on bf16 logits: split by columns into R
// shards of unequal width, each shard's statistics combined as
// nn/cross_entropy.cc does, then each shard's gradient with its column
// offset: together the fused reference's losses and gradient.
TEST(Bf16SoftmaxCrossEntropy, VocabShardsCombineToTheWholeRow) {
  testing::check_kernel(
      "logsumexp_rows_bf16+softmax_xent_backward_bf16",
      {{1, 2, 2}, {3, 37, 2}, {5, 257, 3}, {4, 1001, 4}, {3, 50304, 2}},
      [](const kernels::KernelTable& k, const testing::KernelShape& s, Rng& rng) {
        const int N = s[0], V = s[1], R = s[2];
        const float dscale = 1.0f / N;
        const auto x = random_bf16(rng, size_t(N) * V, -4.0f, 4.0f);
        const auto targets = targets_with_ignored(rng, N, V);
        auto whole_ref = x;
        std::vector<float> losses_ref(N);
        kernels::ref::softmax_cross_entropy_bf16(losses_ref.data(), whole_ref.data(),
                                                 targets.data(), N, V, dscale);
        // Shard r holds columns [lo_r, lo_{r+1}), the first V % R one wider.
        std::vector<int> lo(R + 1);
        for (int r = 0; r <= R; ++r) lo[r] = r * (V / R) + std::min(r, V % R);
        std::vector<std::vector<bf16>> shard(R);
        std::vector<std::vector<float>> mx(R, std::vector<float>(N)), ls = mx;
        std::vector<Compare> cmp;
        for (int r = 0; r < R; ++r) {
          const int w = lo[r + 1] - lo[r];
          for (int i = 0; i < N; ++i)
            shard[r].insert(shard[r].end(), x.begin() + size_t(i) * V + lo[r],
                            x.begin() + size_t(i) * V + lo[r + 1]);
          std::vector<float> m_ref(N), l_ref(N);
          k.logsumexp_rows_bf16(mx[r].data(), ls[r].data(), shard[r].data(), N, w);
          kernels::ref::logsumexp_rows_bf16(m_ref.data(), l_ref.data(), shard[r].data(), N, w);
          const std::string tag = "(shard " + std::to_string(r) + ")";
          cmp.push_back({"max" + tag, mx[r], m_ref, 0, 0});  // a max of bf16 values is exact
          cmp.push_back({"log_sum" + tag, ls[r], l_ref, 1e-5, 1e-5});
        }
        std::vector<float> M(N), LS(N), losses(N);
        for (int i = 0; i < N; ++i) {
          M[i] = -INFINITY;
          for (int r = 0; r < R; ++r) M[i] = std::max(M[i], mx[r][i]);
          double S = 0;
          for (int r = 0; r < R; ++r) S += std::exp(double(ls[r][i]) + (mx[r][i] - M[i]));
          LS[i] = float(std::log(S));
          losses[i] =
              targets[i] < 0 ? 0.0f : LS[i] - (to_f32(x[size_t(i) * V + targets[i]]) - M[i]);
        }
        std::vector<bf16> grad(size_t(N) * V);
        for (int r = 0; r < R; ++r) {
          const int w = lo[r + 1] - lo[r];
          auto naive = shard[r];
          kernels::ref::softmax_xent_backward_bf16(naive.data(), M.data(), LS.data(),
                                                   targets.data(), lo[r], N, w, dscale);
          k.softmax_xent_backward_bf16(shard[r].data(), M.data(), LS.data(), targets.data(), lo[r],
                                       N, w, dscale);
          const std::string tag = "(shard " + std::to_string(r) + ")";
          cmp.push_back(
              compare_bf16(where(k, s), "dlogits" + tag, shard[r], naive, 1e-7 / N, 1e-4));
          for (int i = 0; i < N; ++i)
            std::copy_n(shard[r].begin() + size_t(i) * w, w, grad.begin() + size_t(i) * V + lo[r]);
        }
        cmp.push_back({"losses", losses, losses_ref, 1e-5, 1e-5});
        cmp.push_back(
            compare_bf16(where(k, s), "dlogits(whole row)", grad, whole_ref, 1e-7 / N, 1e-4));
        return cmp;
      });
}

// ---- conversion ----

// f32 bit patterns and their correctly rounded bf16 (round to nearest even,
// NaN quieted): the oracle to_bf16 is checked against them too.
struct Rounding {
  uint32_t in;
  uint16_t out;
};
const Rounding kRoundings[] = {
    {0x3f808000, 0x3f80},  // tie, even mantissa: stays
    {0x3f818000, 0x3f82},  // tie, odd mantissa: up to even
    {0xbf808000, 0xbf80},  // negative tie, even
    {0xbf818000, 0xbf82},  // negative tie, odd: away from zero, to even
    {0x3f807fff, 0x3f80},  // just below a tie
    {0x3f808001, 0x3f81},  // just above a tie
    {0x3f7fffff, 0x3f80},  // rounds up into the next binade (0.99999994 -> 1)
    {0x40490fdb, 0x4049},  // pi
    {0xc2f6e979, 0xc2f7},  // -123.456
    {0x00800000, 0x0080},  // smallest normal
    {0x7f7f7fff, 0x7f7f},  // largest float that stays finite
    {0x7f7f8000, 0x7f80},  // tie at the top, odd mantissa: overflows to +inf
    {0x7f7fffff, 0x7f80},  // FLT_MAX -> +inf
    {0xff7fffff, 0xff80},  // -FLT_MAX -> -inf
    {0x7f800000, 0x7f80},  // +inf
    {0xff800000, 0xff80},  // -inf
    {0x00000000, 0x0000},  // +0
    {0x80000000, 0x8000},  // -0
    {0x7fc00000, 0x7fc0},  // quiet NaN
    {0xffc00000, 0xffc0},  // negative quiet NaN
    {0x7f800001, 0x7fc0},  // signalling NaN, payload below bit 16: NaN, not inf
    {0xff800001, 0xffc0},
    {0x7fa00000, 0x7fe0},  // signalling NaN, payload above bit 16: quieted, kept
    {0x7fffffff, 0x7fff},  // NaN that rounding would carry into the sign bit
};
// Denormals: to_bf16 rounds them; VCVTNEPS2BF16 (avx512bf16) flushes them to
// a signed zero (see rounds_like_to_bf16), so they are outside the
// bit-exact check.
const uint32_t kDenormals[] = {0x00000001, 0x00008000, 0x00018000,
                               0x007fffff, 0x80000001, 0x807fffff};

TEST(Bf16Convert, OracleRoundsToNearestEven) {
  for (const Rounding& r : kRoundings)
    EXPECT_EQ(to_bf16(from_bits(r.in)).bits, r.out) << std::hex << "0x" << r.in;
}

TEST(Bf16Convert, MatchesToBf16BitForBit) {
  testing::check_kernel(
      "convert_to_bf16", {{1}, {13}, {67}, {1000}, {100003}},
      [](const kernels::KernelTable& k, const testing::KernelShape& s, Rng& rng) {
        const size_t n = size_t(s[0]);
        // Uniformly random bit patterns (every class: NaN, inf, zero, denormal,
        // ties are rare), then the listed cases at both ends so they land in
        // full vectors and in the partial tail.
        std::vector<float> in(n);
        for (float& x : in) x = from_bits(rng.next_u32());
        std::vector<uint32_t> special;
        for (const Rounding& r : kRoundings) special.push_back(r.in);
        special.insert(special.end(), std::begin(kDenormals), std::end(kDenormals));
        const size_t S = special.size();
        for (size_t i = 0; i < S; ++i) {
          if (i < n) in[i] = from_bits(special[i]);
          if (i < n && n - 1 - i >= S) in[n - 1 - i] = from_bits(special[i]);
        }
        // Between them, a run of random ties with both mantissa parities.
        for (size_t i = S; i + S < n && i < S + 200; ++i)
          in[i] = from_bits((rng.next_u32() & 0xffff0000u) | 0x8000u);
        std::vector<bf16> out(n);
        k.convert_to_bf16(out.data(), in.data(), n);
        size_t bad = 0, first = n;
        for (size_t i = 0; i < n; ++i) {
          const bool ok =
              rounds_like_to_bf16(in[i], out[i]) && std::isnan(in[i]) == std::isnan(to_f32(out[i]));
          if (!ok && bad++ == 0) first = i;
        }
        EXPECT_EQ(bad, 0u) << where(k, s) << ": first at " << first << std::hex << " in 0x"
                           << (first < n ? f32_bits(in[first]) : 0) << " got 0x"
                           << (first < n ? out[first].bits : 0) << " want 0x"
                           << (first < n ? to_bf16(in[first]).bits : 0);
        for (size_t i = 0; i < std::size(kRoundings) && i < n; ++i) {
          EXPECT_EQ(out[i].bits, kRoundings[i].out)
              << where(k, s) << std::hex << " in 0x" << kRoundings[i].in;
          if (n - 1 - i >= S) {
            EXPECT_EQ(out[n - 1 - i].bits, kRoundings[i].out) << where(k, s) << " (tail)";
          }
        }
        return std::vector<Compare>{};
      });
}

// ---- AdamW ----

const std::vector<testing::KernelShape> kSizes = {{1}, {7}, {33}, {100}, {257}, {100003}};
constexpr float kLr = 0.01f, kBeta1 = 0.9f, kBeta2 = 0.95f, kEps = 1e-8f, kWd = 0.1f, kClip = 0.7f;

// p_bf16 is the working copy bf16 GEMMs read: to_bf16(p) exactly.
void expect_p_bf16_is_rounded_p(const std::string& ctx, const std::vector<float>& p,
                                const std::vector<bf16>& p_bf16) {
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < p.size(); ++i)
    if (!rounds_like_to_bf16(p[i], p_bf16[i]) && bad++ == 0) first = i;
  EXPECT_EQ(bad, 0u) << ctx << ": p_bf16 != to_bf16(p), first at " << first << " p " << p[first]
                     << " p_bf16 " << to_f32(p_bf16[first]);
}

TEST(Bf16AdamW, ParameterCopyIsTheRoundedParameter) {
  testing::check_kernel(
      "adamw+p_bf16", kSizes,
      [](const kernels::KernelTable& k, const testing::KernelShape& s, Rng& rng) {
        const size_t n = size_t(s[0]);
        auto p = testing::random_vector(rng, n), p_ref = p, p_plain = p;
        auto m = testing::random_vector(rng, n, -0.1f, 0.1f), m_ref = m, m_plain = m;
        auto v = testing::random_vector(rng, n, 0.0f, 0.01f), v_ref = v, v_plain = v;
        std::vector<bf16> p_bf16(n, bf16{0x7fc0}), p_bf16_ref(n);  // starts as NaN
        std::vector<Compare> cmp;
        for (int t = 1; t <= 3; ++t) {
          const auto g = testing::random_vector(rng, n);
          const std::string tag = "(t=" + std::to_string(t) + ")";
          k.adamw(p.data(), p_bf16.data(), g.data(), m.data(), v.data(), n, kLr, kBeta1, kBeta2,
                  kEps, kWd, kClip, t);
          k.adamw(p_plain.data(), nullptr, g.data(), m_plain.data(), v_plain.data(), n, kLr, kBeta1,
                  kBeta2, kEps, kWd, kClip, t);
          kernels::ref::adamw(p_ref.data(), p_bf16_ref.data(), g.data(), m_ref.data(), v_ref.data(),
                              n, kLr, kBeta1, kBeta2, kEps, kWd, kClip, t);
          expect_p_bf16_is_rounded_p(where(k, s) + tag, p, p_bf16);
          // Writing the copy changes nothing else: the same bits as without it.
          EXPECT_TRUE(p == p_plain && m == m_plain && v == v_plain) << where(k, s) << tag;
          // The f32 AdamW test's tolerances.
          cmp.push_back({"p" + tag, p, p_ref, 1e-6, 1e-5});
          cmp.push_back({"m" + tag, m, m_ref, 1e-7, 1e-5});
          cmp.push_back({"v" + tag, v, v_ref, 1e-9, 1e-5});
          cmp.push_back(compare_bf16(where(k, s), "p_bf16" + tag, p_bf16, p_bf16_ref, 1e-6, 1e-5));
        }
        return cmp;
      });
}

TEST(Bf16AdamW, Bf16MomentsMatchReference) {
  testing::check_kernel(
      "adamw_bf16_moments", kSizes,
      [](const kernels::KernelTable& k, const testing::KernelShape& s, Rng& rng) {
        const size_t n = size_t(s[0]);
        auto p_ref = testing::random_vector(rng, n);
        auto m_ref = random_bf16(rng, n, -0.1f, 0.1f);
        auto v_ref = random_bf16(rng, n, 0.0f, 0.01f);
        std::vector<bf16> p_bf16(n), p_bf16_ref(n);
        std::vector<Compare> cmp;
        for (int t = 1; t <= 3; ++t) {
          // Each step starts both sides from the same state (the reference's):
          // a moment one bf16 ulp apart after a step would move the next
          // update by ~2^-8 of it, a rounding rather than an error, and the
          // p tolerance stays the f32 one.
          auto p = p_ref;
          auto m = m_ref, v = v_ref;
          const auto g = testing::random_vector(rng, n);
          const std::string tag = "(t=" + std::to_string(t) + ")";
          k.adamw_bf16_moments(p.data(), p_bf16.data(), g.data(), m.data(), v.data(), n, kLr,
                               kBeta1, kBeta2, kEps, kWd, kClip, t);
          kernels::ref::adamw_bf16_moments(p_ref.data(), p_bf16_ref.data(), g.data(), m_ref.data(),
                                           v_ref.data(), n, kLr, kBeta1, kBeta2, kEps, kWd, kClip,
                                           t);
          expect_p_bf16_is_rounded_p(where(k, s) + tag, p, p_bf16);
          // p from the unrounded f32 moments on both sides: the f32 tolerance;
          // m and v: the f32 tolerance plus one bf16 ulp.
          cmp.push_back({"p" + tag, p, p_ref, 1e-6, 1e-5});
          cmp.push_back(compare_bf16(where(k, s), "m" + tag, m, m_ref, 1e-7, 1e-5));
          cmp.push_back(compare_bf16(where(k, s), "v" + tag, v, v_ref, 1e-9, 1e-5));
        }
        return cmp;
      });
}

// ---- the checks themselves ----

// Elements of got outside atol + rtol |want| (the harness's rule).
size_t out_of_tolerance(const std::vector<bf16>& got, const std::vector<bf16>& want, double atol,
                        double rtol) {
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = to_f32(got[i]), w = to_f32(want[i]);
    bad += !(std::fabs(g - w) <= atol + rtol * std::fabs(w));
  }
  return bad;
}

// The checks above fail wrong answers: a LayerNorm output computed with
// weights 2 to 4 bf16 ulps off, an all-zero one and an all-NaN one fail the
// per-element tolerance; one truncated instead of rounded to nearest even
// passes it (one ulp) but fails the bit agreement.
TEST(Bf16Checks, RejectWrongInputsAndWrongRounding) {
  const int N = 64, C = 768;
  const size_t n = size_t(N) * C;
  Rng rng(testing::test_seed(), 97);
  const auto a = testing::random_vector(rng, n, 1.0f, 3.0f);
  const auto w = testing::random_vector(rng, C, 0.5f, 1.5f);
  const auto bias = testing::random_vector(rng, C);
  auto w_off = w;
  for (float& x : w_off) x *= 1.0f + 1.0f / 64;  // 2 to 4 bf16 ulps
  std::vector<float> mean(N), rstd(N), out_f32(n);
  std::vector<bf16> off(n), truncated(n);
  kernels::ref::residual_layernorm_forward_bf16(nullptr, off.data(), mean.data(), rstd.data(),
                                                a.data(), nullptr, w_off.data(), bias.data(), N, C);
  kernels::ref::residual_layernorm_forward(nullptr, out_f32.data(), mean.data(), rstd.data(),
                                           a.data(), nullptr, w.data(), bias.data(), N, C);
  for (size_t i = 0; i < n; ++i) truncated[i].bits = uint16_t(f32_bits(out_f32[i]) >> 16);
  for (const kernels::KernelTable* k : kernels::supported_tables()) {
    std::vector<bf16> out(n);
    k->residual_layernorm_forward_bf16(nullptr, out.data(), mean.data(), rstd.data(), a.data(),
                                       nullptr, w.data(), bias.data(), N, C);
    const double rtol = kBf16Rtol + 1e-4;  // as in Bf16LayerNorm
    EXPECT_EQ(out_of_tolerance(out, narrow(out_f32), 1e-5, rtol), 0u) << k->isa;
    EXPECT_GT(out_of_tolerance(out, off, 1e-5, rtol), n / 10) << k->isa;
    EXPECT_EQ(out_of_tolerance(out, truncated, 1e-5, rtol), 0u) << k->isa;
    EXPECT_GT(out_of_tolerance(std::vector<bf16>(n), out, 1e-5, rtol), n / 2) << k->isa;  // zeros
    EXPECT_EQ(out_of_tolerance(std::vector<bf16>(n, bf16{0x7fc0}), out, 1e-5, rtol), n)
        << k->isa;  // NaN
    const auto [flips, considered] = rounding_flips(out, truncated, 1e-5, 1e-4);
    EXPECT_GT(flips, allowed_flips(considered)) << k->isa;
  }
}

}  // namespace
}  // namespace crucible
