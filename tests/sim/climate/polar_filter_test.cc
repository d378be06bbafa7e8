// The polar filter's response: each zonal Fourier mode of a filtered row is
// scaled by S_j(k), the zonal mean is kept, rows equatorward of the filter
// latitude are untouched, and no row's effective zonal wavenumber exceeds
// that of the filter latitude.
#include "sim/climate/polar_filter.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace crucible::sim::climate {
namespace {

// nlat 36: nlon 72, the convolution; nlat 300: nlon 600 = 2^3 3 5^2, the FFT;
// nlat 294: nlon 588 = 4 3 7^2, the convolution (a factor 7).
class ClimatePolarFilter : public ::testing::TestWithParam<int> {};

TEST_P(ClimatePolarFilter, ScalesEachModeByItsResponse) {
  const Grid g(GetParam());
  const PolarFilter f(g, 60.0);
  const int n = g.nlon;
  std::vector<double> x(n), y(n), z(n), scratch(f.scratch_doubles());
  int filtered = 0;
  for (int j = 0; j < g.nlat; ++j) {
    const bool polar = std::abs(g.lat_deg(j)) > 60.0;
    EXPECT_EQ(f.filtered(j), polar) << "row " << j;
    filtered += f.filtered(j);
    for (int k : {0, 1, 5, n / 4, n / 2 - 1, n / 2}) {
      for (int i = 0; i < n; ++i) x[i] = y[i] = 3.0 + std::cos(k * g.lon[i] + 0.3), z[i] = 2 * x[i];
      f.apply(j, x.data(), y.data(), z.data(), scratch.data());
      const double s = f.response(j, k);
      if (!polar) {
        EXPECT_EQ(s, 1.0);
      }
      for (int i = 0; i < n; ++i) {
        const double want = k == 0 ? 3.0 + std::cos(0.3) : 3.0 + s * std::cos(k * g.lon[i] + 0.3);
        ASSERT_NEAR(x[i], want, 1e-12) << "row " << j << " k " << k << " i " << i;
        ASSERT_NEAR(y[i], want, 1e-12) << "row " << j << " k " << k << " i " << i;
        ASSERT_NEAR(z[i], 2 * want, 1e-12) << "row " << j << " k " << k << " i " << i;
      }
    }
  }
  EXPECT_EQ(filtered, f.filtered_rows());
  EXPECT_EQ(filtered, 2 * (g.nlat - 2 * int(std::ceil(g.nlat * 60.0 / 180 - 1e-9))) / 2);
}

INSTANTIATE_TEST_SUITE_P(FftAndConvolution, ClimatePolarFilter, ::testing::Values(36, 300, 294));

TEST(ClimatePolarFilterBounds, BoundsTheEffectiveZonalWavenumber) {
  const Grid g(72);
  const PolarFilter f(g, 60.0), none(g, 90.0);
  const double kx_c = 1.0 / (kRadius * std::cos(60.0 * kPi / 180) * g.dlon);
  for (int j = 0; j < g.nlat; ++j) {
    if (f.filtered(j)) {
      EXPECT_LE(f.max_zonal_wavenumber(j), kx_c * (1 + 1e-12)) << "row " << j;
    }
    EXPECT_GE(none.max_zonal_wavenumber(j), f.max_zonal_wavenumber(j));
  }
  // Unfiltered, the polar row limits the step ~23x more than the row at 60 degrees.
  EXPECT_GT(none.max_zonal_wavenumber(0), 20 * kx_c);
  EXPECT_EQ(none.filtered_rows(), 0);
}

}  // namespace
}  // namespace crucible::sim::climate

namespace crucible::sim::climate {
namespace {

// Bands cover the rows in order, each non-empty, with near-equal cost: the
// expensive polar rows go to narrower bands.
TEST(ClimateSplitRows, BalancesTheCost) {
  std::vector<double> cost(360, 1.0);
  for (int j = 0; j < 360; ++j)
    if (j < 60 || j >= 300) cost[j] = 15.0;
  for (int size : {1, 2, 3, 4, 7}) {
    const std::vector<Band> b = split_rows(cost, size);
    ASSERT_EQ(int(b.size()), size);
    double worst = 0, total = 0;
    for (int r = 0; r < size; ++r) {
      EXPECT_EQ(b[r].j0, r == 0 ? 0 : b[r - 1].j1);
      EXPECT_GE(b[r].rows(), 1);
      double c = 0;
      for (int j = b[r].j0; j < b[r].j1; ++j) c += cost[j];
      worst = std::max(worst, c);
      total += c;
    }
    EXPECT_EQ(b.back().j1, 360);
    EXPECT_LE(worst, total / size + 15.0) << size << " ranks";
  }
  const std::vector<Band> four = split_rows(cost, 4);
  EXPECT_EQ(four[0].j1, 34);  // 510 of 2040: 34 filtered rows
  const std::vector<Band> tight = split_rows(std::vector<double>(4, 1.0), 4);
  for (int r = 0; r < 4; ++r) EXPECT_EQ(tight[r].rows(), 1);
}

}  // namespace
}  // namespace crucible::sim::climate
