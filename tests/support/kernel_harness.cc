#include "support/kernel_harness.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>

namespace crucible::testing {

uint64_t test_seed() {
  static uint64_t seed = [] {
    if (const char* s = std::getenv("CRUCIBLE_TEST_SEED")) return uint64_t(std::strtoull(s, nullptr, 10));
    return uint64_t(std::chrono::steady_clock::now().time_since_epoch().count());
  }();
  return seed;
}

std::vector<float> random_vector(Rng& rng, size_t n, float lo, float hi) {
  std::vector<float> v(n);
  rng.fill_uniform(v.data(), n, lo, hi);
  return v;
}

kernels::StepScalars adamw_step(float lr, float clip, int t, float beta1, float beta2) {
  kernels::StepScalars s;
  s.lr = lr;
  s.t = t;
  kernels::ref::adamw_scalars(&s, 0.0f, beta1, beta2);  // the bias corrections; no clipping
  s.clip = clip;
  return s;
}

void check_kernel(const std::string& kernel, const std::vector<KernelShape>& shapes,
                  const KernelBody& body) {
  uint64_t seed = test_seed();
  uint64_t stream = std::hash<std::string>{}(kernel);
  for (const kernels::KernelTable* table : kernels::supported_tables()) {
    for (size_t si = 0; si < shapes.size(); ++si) {
      Rng rng(seed, stream, si * 1000003);
      std::string shape_str;
      for (int d : shapes[si]) shape_str += (shape_str.empty() ? "" : "x") + std::to_string(d);
      for (const Compare& c : body(*table, shapes[si], rng)) {
        ASSERT_EQ(c.got.size(), c.want.size()) << kernel << " " << c.what;
        double worst = 0;
        size_t worst_i = 0, bad = 0;
        for (size_t i = 0; i < c.got.size(); ++i) {
          double err = std::fabs(double(c.got[i]) - c.want[i]);
          double lim = c.atol + c.rtol * std::fabs(double(c.want[i]));
          bool ok = err <= lim;  // false for NaN
          if (!ok) ++bad;
          double excess = std::isnan(err) ? INFINITY : err / lim;
          if (excess > worst) {
            worst = excess;
            worst_i = i;
          }
        }
        EXPECT_EQ(bad, 0u) << "[" << kernel << "] isa=" << table->isa << " shape=" << shape_str
                           << " output=" << c.what << ": " << bad << " of " << c.got.size()
                           << " elements out of tolerance; worst at " << worst_i << " got "
                           << c.got[worst_i] << " want " << c.want[worst_i]
                           << " (replay with CRUCIBLE_TEST_SEED=" << seed << ")";
      }
    }
  }
}

}  // namespace crucible::testing
