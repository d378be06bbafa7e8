// The compute and throttling sections: their checks on synthetic inputs, and
// one small real measurement.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/rng.h"
#include "profile/cpu_peak.h"
#include "profile/probe_compute.h"
#include "profile/probe_throttle.h"

namespace crucible::profile {
namespace {

TEST(ProbeCompute, SpotCheckCatchesAWrongProduct) {
  const int m = 17, n = 13, k = 29;
  std::vector<float> A(m * k), B(k * n), C(m * n, 0.0f);
  Rng rng(3, 4);
  rng.fill_uniform(A.data(), A.size(), -1, 1);
  rng.fill_uniform(B.data(), B.size(), -1, 1);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double s = 0;
      for (int p = 0; p < k; ++p) s += double(A[i * k + p]) * B[p * n + j];
      C[i * n + j] = float(s);
    }
  EXPECT_LT(gemm_spot_error(A.data(), B.data(), C.data(), m, n, k, 64, 1), 1e-6);
  // Every entry wrong by a little: any sample sees it.
  for (auto& c : C) c += 0.01f;
  EXPECT_GT(gemm_spot_error(A.data(), B.data(), C.data(), m, n, k, 8, 1), 1e-4);
}

TEST(ProbeCompute, MeasuresAndValidatesSmallShapes) {
  ComputeOptions o;
  o.quick = true;
  o.shapes = {{"small", 64, 96, 80}, {"skinny", 8, 256, 128}};
  o.min_seconds = 0.01;
  nlohmann::json j = probe_compute(o);
  EXPECT_TRUE(j["valid"].get<bool>()) << j.dump();
  ASSERT_GE(j["gemm"].size(), 2u);
  for (const auto& g : j["gemm"]) {
    EXPECT_GT(g["gflops"].get<double>(), 0.0) << g.dump();
    EXPECT_TRUE(std::isfinite(g["fraction_of_peak"].get<double>()));
    EXPECT_LT(g["max_rel_error"].get<double>(), 1e-3);
  }
  const auto& p = j["peak"];
  EXPECT_GT(p["clock_ghz"].get<double>(), 0.3);
  EXPECT_EQ(p["derived_gflops_all"].get<double>(),
            p["derived_gflops_1"].get<double>() * p["threads_all"].get<int>());
  EXPECT_FALSE(compute_table(j).empty());
}

std::vector<std::vector<ThrottleSample>> samples(double first_rate, double last_rate, int threads,
                                                 double seconds) {
  std::vector<std::vector<ThrottleSample>> out(static_cast<size_t>(threads));
  for (auto& t : out)
    for (double s = 0.05; s <= seconds; s += 0.05) {
      const double f = s / seconds;  // linear ramp from first to last
      t.push_back({s, first_rate + (last_rate - first_rate) * f, 3.0 * (1 - 0.5 * (1 - last_rate / first_rate) * f)});
    }
  return out;
}

TEST(ProbeThrottle, FlagsASustainedDrop) {
  auto j = summarize_throttle(samples(100, 70, 2, 6), 6, 0.05);
  ASSERT_TRUE(j["valid"].get<bool>());
  EXPECT_TRUE(j["throttling"].get<bool>());
  // First second: mean rate ~97.5 per thread, last ~72.5: a drop of ~25%.
  EXPECT_NEAR(j["drop"].get<double>(), 0.25, 0.03);
  EXPECT_NEAR(j["first_gflops"].get<double>(), 2 * 97.5, 2);
  EXPECT_GT(j["clock_drop"].get<double>(), 0.05);
  EXPECT_EQ(j["windows"].size(), 12u);
  EXPECT_NE(throttle_table(j).find("THROTTLING"), std::string::npos);
}

TEST(ProbeThrottle, SteadyRateIsNotFlagged) {
  auto j = summarize_throttle(samples(100, 99, 2, 6), 6, 0.05);
  ASSERT_TRUE(j["valid"].get<bool>());
  EXPECT_FALSE(j["throttling"].get<bool>());
  EXPECT_NEAR(j["drop"].get<double>(), 0.01, 0.01);
}

TEST(ProbeThrottle, AThreadWithoutSamplesIsInvalid) {
  auto s = samples(100, 100, 2, 4);
  s[1].clear();
  auto j = summarize_throttle(s, 4, 0.05);
  EXPECT_FALSE(j["valid"].get<bool>());
  EXPECT_FALSE(j["throttling"].get<bool>());
}

TEST(ProbeThrottle, ShortRealRun) {
  ThrottleOptions o;
  o.seconds = 1.0;
  auto j = probe_throttle(o);
  ASSERT_TRUE(j["valid"].get<bool>()) << j.dump();
  EXPECT_GT(j["first_gflops"].get<double>(), 1.0);
  EXPECT_GT(j["last_clock_ghz"].get<double>(), 0.3);
}

}  // namespace
}  // namespace crucible::profile
