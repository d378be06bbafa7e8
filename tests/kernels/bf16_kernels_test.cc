// The bf16-activation kernels (signatures.inc, "bf16 activations") against
// their references (kernels/ref/bf16_ref.cc: widen, run the f32 reference in
// double, round once) on every ISA this CPU runs, avx512bf16's native
// conversions included. bf16 inputs are drawn as floats and rounded with
// to_bf16; the same bits go to the fast kernel and to the reference. Shapes
// are odd on purpose: C not a multiple of 16, T not a multiple of the 32-key
// tile, V odd and V = 50304 with few rows, hs = 12, 24 and 64.
//
// Tolerances: support/bf16_checks.h. This file: LayerNorm, bias+GELU,
// attention, and the checks themselves; bf16_loss_optim_test.cc has the
// cross-entropy, the conversion and AdamW.
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
#include "support/attention_bounds.h"
#include "support/bf16_checks.h"
#include "support/kernel_harness.h"

namespace crucible {
namespace {

using testing::attention_backward_reading_out;
using testing::dot_bounds;
using testing::DotBounds;

using namespace bf16check;

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


// A bf16 output within atol + (rtol + one bf16 ulp) |want| + bound of each
// element; the Compare returned gives the harness the same with the largest
// bound (it also fails NaN and infinities).
Compare within_bound(const std::string& ctx, const std::string& what, const std::vector<bf16>& got,
                     const std::vector<float>& want, const std::vector<double>& bound, double atol,
                     double rtol) {
  const auto g = widen(got);
  size_t beyond = 0, worst = 0;
  double worst_excess = -INFINITY, max_bound = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    const double excess = std::fabs(double(g[i]) - want[i]) -
                          (atol + (rtol + kBf16Rtol) * std::fabs(want[i]) + bound[i]);
    beyond += excess > 0;
    if (excess > worst_excess) worst_excess = excess, worst = i;
    max_bound = std::max(max_bound, bound[i]);
  }
  EXPECT_EQ(beyond, 0u) << ctx << " " << what << ": " << beyond << " of " << g.size()
                        << " elements beyond the bf16 products' bound; worst at " << worst
                        << " got " << g[worst] << " want " << want[worst] << " bound "
                        << bound[worst]
                        << " (replay with CRUCIBLE_TEST_SEED=" << testing::test_seed() << ")";
  return {what, g, want, atol + max_bound, rtol + kBf16Rtol};
}

float max_abs(const std::vector<float>& x) {
  float m = 0;
  for (float v : x) m = std::max(m, std::fabs(v));
  return m;
}

// One bf16 attention, forward and backward, against the references: the
// widened kernels with the f32 test's tolerances plus the bf16 rounding
// checks (compare_bf16), the pairs form with dot_bounds on top of those
// tolerances (it rounds P, dO and dS, so its bits are not the reference's).
std::vector<Compare> check_attention_bf16(const kernels::KernelTable& k,
                                          const testing::KernelShape& s, Rng& rng, bool pairs) {
  const int B = s[0], T = s[1], C = s[2], NH = s[3];
  const size_t n = size_t(B) * T * C, nl = size_t(B) * NH * T;
  const auto forward = pairs ? k.attention_forward_bf16_pairs : k.attention_forward_bf16;
  const auto backward = pairs ? k.attention_backward_bf16_pairs : k.attention_backward_bf16;
  const std::string ctx = where(k, s) + (pairs ? " pairs" : "");
  const auto qkv = random_bf16(rng, 3 * n);
  const auto dout = testing::random_vector(rng, n);  // an f32 GEMM output
  std::vector<bf16> out(n), out_ref(n);
  std::vector<float> lse(nl), lse_ref(nl);
  // dqkv starts as garbage: the contract is "=", not "+=".
  auto dqkv = random_bf16(rng, 3 * n, 5.0f, 9.0f);
  std::vector<bf16> dqkv_ref(3 * n);
  forward(out.data(), lse.data(), qkv.data(), B, T, C, NH);
  backward(dqkv.data(), dout.data(), qkv.data(), out.data(), lse.data(), B, T, C, NH);
  kernels::ref::attention_forward_bf16(out_ref.data(), lse_ref.data(), qkv.data(), B, T, C, NH);
  kernels::ref::attention_backward_bf16(dqkv_ref.data(), dout.data(), qkv.data(), out_ref.data(),
                                        lse_ref.data(), B, T, C, NH);
  // The test's own oracle, validated against the library's: with the exact
  // (f32) out both are the exact gradient.
  const auto qkv_f = widen(qkv);
  std::vector<float> out_f32(n), lse_f32(nl), dqkv_f32(3 * n);
  kernels::ref::attention_forward(out_f32.data(), lse_f32.data(), qkv_f.data(), B, T, C, NH);
  kernels::ref::attention_backward(dqkv_f32.data(), dout.data(), qkv_f.data(), out_f32.data(),
                                   lse_f32.data(), B, T, C, NH);
  const auto exact = attention_backward_reading_out(dout, qkv_f, out_f32, B, T, C, NH);
  const auto reading = attention_backward_reading_out(dout, qkv_f, widen(out), B, T, C, NH);
  const auto d = split_qkv(dqkv, B * T, C), d_ref = split_qkv(dqkv_ref, B * T, C);
  const auto e = split_qkv(exact, B * T, C), r = split_qkv(reading, B * T, C);
  // The widened kernels round nothing but their outputs: no bound.
  DotBounds bd{std::vector<double>(n, 0.0), std::vector<double>(3 * n, 0.0)};
  if (pairs) {
    bd = dot_bounds(qkv_f, dout, widen(out), B, T, C, NH);
    // The bounds are the size the argument says, not a blanket: P's
    // rounding moves out by at most u |v|max = 2^-8 (|v| <= 1 here).
    EXPECT_LE(*std::max_element(bd.out.begin(), bd.out.end()), std::ldexp(1.0, -8) * (1 + 1e-9))
        << ctx;
  }
  const auto bq = split_qkv(bd.dqkv, B * T, C);
  // The f32 attention test's tolerances (2e-5, 2e-4), plus one bf16 ulp on
  // bf16 outputs, plus the bound.
  auto check = [&](const std::string& what, const std::vector<bf16>& got,
                   const std::vector<float>& want, const std::vector<double>& bound, double atol) {
    if (!pairs) return compare_bf16(ctx, what, got, narrow(want), atol, 2e-4);
    return within_bound(ctx, what, got, want, bound, atol, 2e-4);
  };
  std::vector<Compare> cmp = {check("out", out, widen(out_ref), bd.out, 2e-5),
                              {"lse", lse, lse_ref, 2e-5, 2e-4},
                              {"oracle dqkv (exact out)", exact, dqkv_f32, 2e-5, 2e-4},
                              check("dv", d[2], widen(d_ref[2]), bq[2], 2e-5)};
  const char* names[2] = {"dq", "dk"};
  for (int p = 0; p < 2; ++p) {
    // Against the oracle that reads the same bf16 out as the kernel.
    cmp.push_back(check(std::string(names[p]) + " (D from stored out)", d[p], r[p], bq[p], 2e-5));
    // Against the library reference (exact D): apart by the out rounding's
    // effect too, measured as reading - exact, plus both sides' f32
    // tolerances.
    std::vector<float> effect(r[p].size());
    for (size_t i = 0; i < effect.size(); ++i) effect[i] = r[p][i] - e[p][i];
    cmp.push_back(check(names[p], d[p], widen(d_ref[p]), bq[p], 2 * 2e-5 + max_abs(effect)));
  }
  return cmp;
}

TEST(Bf16Attention, ForwardAndBackwardMatchReference) {
  testing::check_kernel("attention_bf16", kAttentionShapes,
                        [](const kernels::KernelTable& k, const testing::KernelShape& s, Rng& rng) {
                          // What the table dispatches: the pairs form on avx512bf16.
                          const bool pairs =
                              k.attention_forward_bf16 == k.attention_forward_bf16_pairs;
                          return check_attention_bf16(k, s, rng, pairs);
                        });
}

// The pairs form on every CPU (the instruction's arithmetic in two FMAs where
// the CPU lacks it: the same bits but for denormals, isa/tile_gemm.h).
TEST(Bf16Attention, PairsFormMatchesReferenceWithinItsRounding) {
  testing::check_kernel("attention_bf16_pairs", kAttentionShapes,
                        [](const kernels::KernelTable& k, const testing::KernelShape& s, Rng& rng) {
                          return check_attention_bf16(k, s, rng, true);
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
  for (const kernels::KernelTable* k : kernels::supported_tables())
    for (bool pairs : {false, true}) {
      const auto forward = pairs ? k->attention_forward_bf16_pairs : k->attention_forward_bf16;
      const auto backward = pairs ? k->attention_backward_bf16_pairs : k->attention_backward_bf16;
      const std::string ctx = std::string(k->isa) + (pairs ? " pairs" : "");
      std::vector<bf16> out[2], dqkv[2];
      std::vector<float> lse[2];
      for (int r = 0; r < 2; ++r) {
        set_num_threads(r == 0 ? 1 : 3);
        out[r].resize(n);
        lse[r].resize(size_t(B) * NH * T);
        dqkv[r].resize(3 * n);
        forward(out[r].data(), lse[r].data(), qkv.data(), B, T, C, NH);
        backward(dqkv[r].data(), dout.data(), qkv.data(), out[r].data(), lse[r].data(), B, T, C,
                 NH);
      }
      expect_same_bits(ctx + " out", out[0], out[1]);
      EXPECT_TRUE(lse[0] == lse[1]) << ctx << " lse";
      expect_same_bits(ctx + " dqkv", dqkv[0], dqkv[1]);
    }
  set_num_threads(saved);
}

// tile_gemm.h's claim: dot2's two FMAs are vdpbf16ps's arithmetic (a product
// of two bf16 is exact in f32, each add rounds once, odd pair first), so the
// avx512 table's pairs form, which emulates it, and the avx512bf16 table's,
// which runs the instruction (and converts with vcvtneps2bf16), agree bit for
// bit on inputs without denormals. Both have the same vector width, so the
// same tiling and summation order. Needs a CPU with AVX512_BF16.
TEST(Bf16Attention, PairsEmulatedBitwiseEqualToVdpbf16ps) {
  const kernels::KernelTable *emulated = nullptr, *native = nullptr;
  for (const kernels::KernelTable* k : kernels::supported_tables()) {
    if (std::string(k->isa) == "avx512") emulated = k;
    if (std::string(k->isa) == "avx512bf16") native = k;
  }
  if (!native) GTEST_SKIP() << "this CPU has no AVX512_BF16";
  ASSERT_NE(emulated, nullptr);
  for (const testing::KernelShape& s : kAttentionShapes) {
    const int B = s[0], T = s[1], C = s[2], NH = s[3];
    const size_t n = size_t(B) * T * C;
    Rng rng(testing::test_seed(), 94);
    const auto qkv = random_bf16(rng, 3 * n);
    const auto dout = testing::random_vector(rng, n);
    std::vector<bf16> out[2], dqkv[2];
    std::vector<float> lse[2];
    for (int r = 0; r < 2; ++r) {
      const kernels::KernelTable* k = r == 0 ? emulated : native;
      out[r].resize(n);
      lse[r].resize(size_t(B) * NH * T);
      dqkv[r].resize(3 * n);
      k->attention_forward_bf16_pairs(out[r].data(), lse[r].data(), qkv.data(), B, T, C, NH);
      k->attention_backward_bf16_pairs(dqkv[r].data(), dout.data(), qkv.data(), out[r].data(),
                                       lse[r].data(), B, T, C, NH);
    }
    const std::string ctx = where(*native, s);
    expect_same_bits(ctx + " out", out[0], out[1]);
    EXPECT_TRUE(lse[0] == lse[1]) << ctx << " lse";
    expect_same_bits(ctx + " dqkv", dqkv[0], dqkv[1]);
  }
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
