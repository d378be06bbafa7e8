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

TEST(ClimatePolarFilter, ScalesEachModeByItsResponse) {
  const Grid g(36);
  const PolarFilter f(g, 60.0);
  const int n = g.nlon;
  std::vector<double> x(n), scratch(2 * n);
  int filtered = 0;
  for (int j = 0; j < g.nlat; ++j) {
    const bool polar = std::abs(g.lat_deg(j)) > 60.0;
    EXPECT_EQ(f.filtered(j), polar) << "row " << j;
    filtered += f.filtered(j);
    for (int k : {0, 1, 5, n / 4, n / 2 - 1, n / 2}) {
      for (int i = 0; i < n; ++i) x[i] = 3.0 + std::cos(k * g.lon[i] + 0.3);
      f.apply(j, x.data(), scratch.data());
      const double s = f.response(j, k);
      if (!polar) {
        EXPECT_EQ(s, 1.0);
      }
      for (int i = 0; i < n; ++i) {
        const double want = k == 0 ? 3.0 + std::cos(0.3) : 3.0 + s * std::cos(k * g.lon[i] + 0.3);
        ASSERT_NEAR(x[i], want, 1e-12) << "row " << j << " k " << k << " i " << i;
      }
    }
  }
  EXPECT_EQ(filtered, f.filtered_rows());
  EXPECT_EQ(filtered, 12);
}

TEST(ClimatePolarFilter, BoundsTheEffectiveZonalWavenumber) {
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
