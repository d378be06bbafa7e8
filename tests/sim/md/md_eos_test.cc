// The Johnson-Zollweg-Gubbins equation of state and the sample statistics.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "sim/md/lj_eos.h"
#include "sim/md/md_stats.h"

namespace crucible::sim::md {
namespace {

// P = rho T + rho^2 dA/drho and U = d(A/T)/d(1/T): the pressure and energy
// formulas are those of the Helmholtz energy they come with.
TEST(MdEos, PressureAndEnergyAreDerivativesOfHelmholtz) {
  for (double T : {0.9, 1.5, 2.0, 4.0})
    for (double rho : {0.1, 0.5, 0.8, 0.95}) {
      const double h = 1e-5;
      const LjEosPoint p = jzg_eos(rho, T);
      const double dA = (jzg_eos(rho + h, T).helmholtz - jzg_eos(rho - h, T).helmholtz) / (2 * h);
      EXPECT_NEAR(p.pressure, rho * T + rho * rho * dA, 1e-6 * (1 + std::fabs(p.pressure)))
          << T << " " << rho;
      const double b1 = 1 / (T * (1 + h)), b0 = 1 / (T * (1 - h));
      const double dbA =
          (jzg_eos(rho, 1 / b1).helmholtz * b1 - jzg_eos(rho, 1 / b0).helmholtz * b0) / (b1 - b0);
      EXPECT_NEAR(p.energy, dbA, 1e-6 * (1 + std::fabs(p.energy))) << T << " " << rho;
    }
}

// Dilute limit: P -> rho T (1 + B2 rho), and B2(T) = -2 pi int (exp(-u/T) - 1)
// r^2 dr of the LJ pair potential: -1.31446 sigma^3 at T = 2 (numerical
// quadrature; -0.62761 in units of 2 pi sigma^3 / 3). An independent check
// of x1..x5.
TEST(MdEos, DiluteLimitIsTheSecondVirialCoefficient) {
  const double rho = 1e-4, T = 2.0;
  const double B2 = (jzg_eos(rho, T).pressure / (rho * T) - 1) / rho;
  EXPECT_NEAR(B2, -1.31446, 0.005);
}

// The state point the workload checks (values of this implementation, pinned).
TEST(MdEos, StatePointTwoPointEight) {
  const LjEosPoint p = jzg_eos(0.8, 2.0);
  EXPECT_NEAR(p.pressure, 5.3117, 1e-4);
  EXPECT_NEAR(p.energy, -4.7603, 1e-4);
}

TEST(MdStats, BlockMeanOfKnownSeries) {
  std::vector<double> v;
  for (int b = 0; b < 4; ++b)
    for (int i = 0; i < 5; ++i) v.push_back(b % 2 ? 2.0 : 0.0);  // block means 0, 2, 0, 2
  v.push_back(100.0);  // the remainder beyond 4 whole blocks is dropped
  const BlockMean m = block_mean(v, 4);
  EXPECT_EQ(m.blocks, 4);
  EXPECT_DOUBLE_EQ(m.mean, 1.0);
  EXPECT_NEAR(m.se, std::sqrt(4.0 / 3.0 / 4.0), 1e-12);
}

TEST(MdStats, SlopeOfALine) {
  EXPECT_NEAR(slope({0, 1, 2, 3}, {1, 3, 5, 7}), 2.0, 1e-12);
  EXPECT_EQ(slope({1}, {5}), 0.0);
}

}  // namespace
}  // namespace crucible::sim::md

#include "sim/md/initial_state.h"
#include "sim/md/xyz_start.h"

namespace crucible::sim::md {
namespace {

// The start: an FCC lattice with nearest neighbours a / sqrt(2) apart, zero
// total momentum, exactly the requested temperature; velocities a function
// of (seed, id) only.
TEST(MdStart, LatticeAndVelocities) {
  const int cells = 3;
  const int64_t n = 4 * cells * cells * cells;
  const double box = std::cbrt(n / 0.8);
  const InitialAtoms s = initial_atoms(cells, box, n, {}, 42, 1.5);
  int64_t a = -1, b = -1;
  EXPECT_NEAR(min_pair_distance(s.pos, box, &a, &b), box / cells / std::sqrt(2.0), 1e-12);
  double p[3] = {0, 0, 0}, ke = 0;
  for (int64_t i = 0; i < n; ++i)
    for (int d = 0; d < 3; ++d)
      p[d] += s.vel[3 * i + d], ke += 0.5 * s.vel[3 * i + d] * s.vel[3 * i + d];
  for (double m : p) EXPECT_NEAR(m, 0.0, 1e-12);
  EXPECT_NEAR(2 * ke / (3.0 * n - 3.0), 1.5, 1e-12);
  EXPECT_EQ(initial_atoms(cells, box, n, {}, 42, 1.5).vel, s.vel);
  EXPECT_NE(initial_atoms(cells, box, n, {}, 43, 1.5).vel, s.vel);
}

}  // namespace
}  // namespace crucible::sim::md
