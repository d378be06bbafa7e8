// Fast AdamW and sum of squares (kernels/isa/adamw.cc) against the double
// reference on every ISA this CPU runs. Sizes cover 1, sizes not a multiple
// of any vector width, and sizes above the threading threshold; AdamW runs
// three steps (t = 1..3, so the bias corrections change) with a clip factor
// and weight decay, from non-zero moments.
#include <gtest/gtest.h>

#include <cmath>

#include "core/threads.h"
#include "kernels/reference.h"
#include "support/kernel_harness.h"

namespace crucible {
namespace {

using testing::Compare;

const std::vector<testing::KernelShape> kSizes = {{1}, {7}, {33}, {100}, {257}, {100003}};

TEST(AdamW, ThreeStepsMatchReference) {
  testing::check_kernel(
      "adamw", kSizes, [](const kernels::KernelTable& k, const testing::KernelShape& s, Rng& rng) {
        const size_t n = size_t(s[0]);
        const float lr = 0.01f, beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, wd = 0.1f, clip = 0.7f;
        auto p = testing::random_vector(rng, n), p_ref = p;
        auto m = testing::random_vector(rng, n, -0.1f, 0.1f), m_ref = m;
        auto v = testing::random_vector(rng, n, 0.0f, 0.01f), v_ref = v;
        std::vector<Compare> cmp;
        for (int t = 1; t <= 3; ++t) {
          auto g = testing::random_vector(rng, n);
          const kernels::StepScalars sc = testing::adamw_step(lr, clip, t, beta1, beta2);
          k.adamw(p.data(), nullptr, g.data(), m.data(), v.data(), n, &sc, beta1, beta2, eps, wd);
          kernels::ref::adamw(p_ref.data(), nullptr, g.data(), m_ref.data(), v_ref.data(), n, &sc, beta1, beta2,
                              eps, wd);
          std::string tag = "(t=" + std::to_string(t) + ")";
          // Updates are ~lr and moments ~0.1 / 0.01: tolerances of a few float
          // ulps of the terms (m = b1 m + (1-b1) g cancels), far below a wrong term.
          cmp.push_back({"p" + tag, p, p_ref, 1e-6, 1e-5});
          cmp.push_back({"m" + tag, m, m_ref, 1e-7, 1e-5});
          cmp.push_back({"v" + tag, v, v_ref, 1e-9, 1e-5});
        }
        return cmp;
      });
}

TEST(SumSquares, AddsToTheSumLikeTheReferenceInDouble) {
  testing::check_kernel("add_sum_squares", {{1}, {7}, {33}, {100}, {257}, {100003}, {(1 << 22) + 3}},
                        [](const kernels::KernelTable& k, const testing::KernelShape& s, Rng& rng) {
                          const size_t n = size_t(s[0]);
                          auto x = testing::random_vector(rng, n);
                          // Added to what is there (the norm's ranges, one after another).
                          double got = 0.25, want = 0.25;
                          k.add_sum_squares(&got, x.data(), n);
                          kernels::ref::add_sum_squares(&want, x.data(), n);
                          // Both sum in double, in different orders: far tighter than float (1e-7).
                          EXPECT_NEAR(got, want, 1e-10 * want) << k.isa << " n=" << n;
                          EXPECT_GT(got, 0.25) << k.isa << " n=" << n;
                          return std::vector<Compare>{};
                        });
}

// Chunks depend on n alone and are added in order, so the bits must not
// depend on the thread count (every rank must agree on the clip factor).
TEST(SumSquares, BitwiseIndependentOfThreadCount) {
  const size_t n = (size_t(1) << 21) + 5;
  Rng rng(testing::test_seed(), 61);
  auto x = testing::random_vector(rng, n);
  const int saved = num_threads();
  for (const kernels::KernelTable* k : kernels::supported_tables()) {
    double one = 0, three = 0;
    set_num_threads(1);
    k->add_sum_squares(&one, x.data(), n);
    set_num_threads(3);
    k->add_sum_squares(&three, x.data(), n);
    EXPECT_EQ(one, three) << k->isa;
  }
  set_num_threads(saved);
}

// The clip factor and bias corrections formed where the step runs: PyTorch's
// clip_grad_norm_ (max_norm / (norm + 1e-6) below 1, else 1) and 1 - beta^t,
// on every table, for norms below, at and above the bound, and no bound.
TEST(AdamWScalars, ClipAndBiasCorrectionsAsPyTorchForms) {
  struct Case {
    double grad_sq;
    float max_norm;
    int t;
    float clip;  // expected
  };
  const Case cases[] = {{0.25, 1.0f, 1, 1.0f},                            // norm 0.5 < 1: none
                        {16.0, 1.0f, 7, float(1.0 / (4.0 + 1e-6))},       // norm 4: 1/4
                        {1.0, 1.0f, 100, float(1.0 / (1.0 + 1e-6))},      // at the bound: just below 1
                        {1e6, 0.0f, 3, 1.0f},                             // no clipping
                        {2.25e4, 2.5f, 100000, float(2.5 / (150.0 + 1e-6))}};
  for (const Case& c : cases) {
    for (const kernels::KernelTable* k : kernels::supported_tables()) {
      kernels::StepScalars s;
      s.grad_sq = c.grad_sq;
      s.t = c.t;
      s.lr = 0.5f;
      k->adamw_scalars(&s, c.max_norm, 0.9f, 0.95f);
      EXPECT_EQ(s.clip, c.clip) << k->isa << " grad_sq " << c.grad_sq;
      EXPECT_EQ(s.bc1, 1.0 - std::pow(0.9f, double(c.t))) << k->isa;
      EXPECT_EQ(s.bc2, 1.0 - std::pow(0.95f, double(c.t))) << k->isa;
      EXPECT_EQ(s.lr, 0.5f) << "the host's values stay";
      EXPECT_EQ(s.grad_sq, c.grad_sq);
    }
  }
}

}  // namespace
}  // namespace crucible
