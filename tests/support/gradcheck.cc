#include "support/gradcheck.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "support/kernel_harness.h"

namespace crucible::testing {

double weighted_sum(const float* y, const std::vector<float>& w) {
  double s = 0;
  for (size_t i = 0; i < w.size(); ++i) s += double(w[i]) * y[i];
  return s;
}

void grad_check(const std::function<double()>& loss, const std::vector<GradTarget>& targets,
                Rng& rng, const GradCheckOptions& opt) {
  for (const auto& t : targets) {
    double amax = 0;
    size_t imax = 0;
    for (size_t i = 0; i < t.n; ++i)
      if (std::fabs(t.analytic[i]) > amax) amax = std::fabs(t.analytic[i]), imax = i;
    ASSERT_GT(amax, 0.0) << t.name << ": analytic gradient is identically zero";
    std::vector<size_t> idx = {imax};
    for (int s = 0; s < opt.random_samples; ++s) idx.push_back(rng.next_u32() % t.n);
    for (size_t i : idx) {
      float saved = t.x[i];
      double h = opt.eps * std::max(1.0, std::fabs(double(saved)));
      t.x[i] = float(saved + h);
      double hp = double(t.x[i]) - saved;  // the step actually representable in f32
      double lp = loss();
      t.x[i] = float(saved - h);
      double hm = saved - double(t.x[i]);
      double lm = loss();
      t.x[i] = saved;
      double fd = (lp - lm) / (hp + hm);
      double an = t.analytic[i];
      double tol = opt.rtol * std::max(std::fabs(fd), std::fabs(an)) + opt.atol_frac * amax;
      EXPECT_NEAR(fd, an, tol) << t.name << "[" << i << "] (max |grad| " << amax << ", seed "
                               << test_seed() << ")";
    }
  }
}

}  // namespace crucible::testing
