// Fast residual + LayerNorm forward and LayerNorm backward
// (kernels/isa/layernorm.cc) against the double reference on every ISA this
// CPU runs. Shapes (N, C) cover C = 1, C not a multiple of any vector width,
// and GPT-2's C = 768 and 1600; the forward runs with and without the
// residual input and the residual output.
#include <gtest/gtest.h>

#include <algorithm>

#include "core/threads.h"
#include "kernels/reference.h"
#include "support/kernel_harness.h"

namespace crucible {
namespace {

using testing::Compare;

const std::vector<testing::KernelShape> kShapes = {{1, 1},   {1, 7},    {7, 33},  {33, 100},
                                                   {5, 257}, {64, 768}, {9, 1600}};

TEST(LayerNorm, ResidualForwardMatchesReference) {
  testing::check_kernel(
      "residual_layernorm_forward", kShapes,
      [](const kernels::KernelTable& k, const testing::KernelShape& s, Rng& rng) {
        const int N = s[0], C = s[1];
        const size_t n = size_t(N) * C;
        // a is offset from 0 so the mean is not ~0 (a sloppy variance would show).
        auto a = testing::random_vector(rng, n, 1.0f, 3.0f);
        auto b = testing::random_vector(rng, n);
        auto w = testing::random_vector(rng, C, 0.5f, 1.5f);
        auto bias = testing::random_vector(rng, C);
        std::vector<Compare> cmp;
        for (bool fused : {true, false}) {  // with b and resid_out, then with neither
          std::string tag = fused ? "(a+b)" : "(a)";
          std::vector<float> resid(n), out(n), mean(N), rstd(N);
          std::vector<float> resid_ref(n), out_ref(n), mean_ref(N), rstd_ref(N);
          k.residual_layernorm_forward(fused ? resid.data() : nullptr, out.data(), mean.data(),
                                       rstd.data(), a.data(), fused ? b.data() : nullptr, w.data(),
                                       bias.data(), N, C);
          kernels::ref::residual_layernorm_forward(
              resid_ref.data(), out_ref.data(), mean_ref.data(), rstd_ref.data(), a.data(),
              fused ? b.data() : nullptr, w.data(), bias.data(), N, C);
          if (fused) cmp.push_back({"resid_out", resid, resid_ref, 0, 0});  // a + b is exact
          // At C = 1 the variance is 0 and out = bias + (x - mean) * 316 w: the
          // reference's mean is the exact a + b (double), x its float rounding,
          // so it carries up to half an ulp of a + b times 316.
          cmp.push_back({"out" + tag, out, out_ref, C == 1 ? 5e-4 : 1e-5, 1e-4});
          cmp.push_back({"mean" + tag, mean, mean_ref, 1e-6, 1e-5});
          // C = 1 has variance 0, rstd = 1/sqrt(eps) ~ 316: relative tolerance.
          cmp.push_back({"rstd" + tag, rstd, rstd_ref, 1e-5, 1e-4});
        }
        return cmp;
      });
}

TEST(LayerNorm, BackwardAccumulatesAndMatchesReference) {
  testing::check_kernel("layernorm_backward", kShapes,
                        [](const kernels::KernelTable& k, const testing::KernelShape& s, Rng& rng) {
                          const int N = s[0], C = s[1];
                          const size_t n = size_t(N) * C;
                          auto x = testing::random_vector(rng, n, -2.0f, 2.0f);
                          auto w = testing::random_vector(rng, C, 0.5f, 1.5f);
                          auto bias = testing::random_vector(rng, C);
                          auto dout = testing::random_vector(rng, n);
                          std::vector<float> out(n), mean(N), rstd(N);
                          kernels::ref::residual_layernorm_forward(nullptr, out.data(), mean.data(),
                                                                   rstd.data(), x.data(), nullptr,
                                                                   w.data(), bias.data(), N, C);
                          // Gradients start non-zero: the contract is "+=".
                          auto dx = testing::random_vector(rng, n), dx_ref = dx;
                          auto dw = testing::random_vector(rng, C), dw_ref = dw;
                          auto dbias = testing::random_vector(rng, C), dbias_ref = dbias;
                          k.layernorm_backward(dx.data(), dw.data(), dbias.data(), dout.data(),
                                               x.data(), w.data(), mean.data(), rstd.data(), N, C);
                          kernels::ref::layernorm_backward(
                              dx_ref.data(), dw_ref.data(), dbias_ref.data(), dout.data(), x.data(),
                              w.data(), mean.data(), rstd.data(), N, C);
                          // dx = rstd (dnorm - mean(dnorm) - norm mean(dnorm norm)):
                          // the f32 kernel's rounding of the bracket (~1e-7 of
                          // its terms, which cancel) is multiplied by rstd, so
                          // dx's absolute tolerance scales with it. That
                          // matters at C = 1, where the variance is 0 and rstd
                          // = 1/sqrt(eps) = 316 (the bracket is 0 exactly, the
                          // kernel's FMA-contracted one a product's rounding).
                          const float r_max = *std::max_element(rstd.begin(), rstd.end());
                          const double dx_atol = 1e-5 * std::max(1.0, double(r_max));
                          return std::vector<Compare>{{"dx", dx, dx_ref, dx_atol, 1e-4},
                                                      {"dw", dw, dw_ref, 1e-5, 1e-4},
                                                      {"dbias", dbias, dbias_ref, 1e-5, 1e-4}};
                        });
}

// dw/dbias are summed over fixed row blocks added in block order, so the bits
// must not depend on the thread count.
TEST(LayerNorm, BackwardBitwiseIndependentOfThreadCount) {
  const int N = 101, C = 257;
  const size_t n = size_t(N) * C;
  Rng rng(testing::test_seed(), 41);
  auto x = testing::random_vector(rng, n), dout = testing::random_vector(rng, n);
  auto w = testing::random_vector(rng, C), bias = testing::random_vector(rng, C);
  std::vector<float> out(n), mean(N), rstd(N);
  kernels::ref::residual_layernorm_forward(nullptr, out.data(), mean.data(), rstd.data(), x.data(),
                                           nullptr, w.data(), bias.data(), N, C);
  const int saved = num_threads();
  for (const kernels::KernelTable* k : kernels::supported_tables()) {
    std::vector<float> dx[2], dw[2], dbias[2];
    for (int r = 0; r < 2; ++r) {
      set_num_threads(r == 0 ? 1 : 3);
      dx[r].assign(n, 0.25f);
      dw[r].assign(C, 0.25f);
      dbias[r].assign(C, 0.25f);
      k->layernorm_backward(dx[r].data(), dw[r].data(), dbias[r].data(), dout.data(), x.data(),
                            w.data(), mean.data(), rstd.data(), N, C);
    }
    EXPECT_EQ(dx[0], dx[1]) << k->isa;
    EXPECT_EQ(dw[0], dw[1]) << k->isa;
    EXPECT_EQ(dbias[0], dbias[1]) << k->isa;
  }
  set_num_threads(saved);
}

}  // namespace
}  // namespace crucible
