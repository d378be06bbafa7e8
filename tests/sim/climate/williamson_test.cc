// The reference checks of Williamson et al. (1992) for `crucible sim
// climate`: case 2's normalised error norms against its exact solution and
// their order of convergence (alpha = 0 and a flow tilted over the poles),
// case 6's and case 5's conservation of mass (round-off) and their energy
// and potential-enstrophy drift. Figures measured are in docs/sim/climate.md.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "comm/comm.h"
#include "sim/climate/climate.h"
#include "support/files.h"

namespace crucible::sim {
namespace {

// Runs c to the end on one rank; returns the last metrics row and the
// summary's largest drifts.
nlohmann::json run(const ClimateConfig& c) {
  auto comm = comm::make_single_comm();
  auto w = make_climate_workload(c, *comm, 0);
  EXPECT_TRUE(w.is_ok()) << w.status().message();
  if (!w) return {};
  Status s = (*w)->begin(".");
  while (s.is_ok() && (*w)->steps_done() < (*w)->total_steps()) s = (*w)->step();
  EXPECT_TRUE(s.is_ok()) << s.message();
  nlohmann::json m = (*w)->metrics();
  m["steps"] = (*w)->total_steps();
  return m;
}

ClimateConfig case2(int nlat, double alpha_deg) {
  ClimateConfig c;
  c.test_case = 2;
  c.nlat = nlat;
  c.days = 5;  // Williamson's reporting time for case 2
  c.alpha_deg = alpha_deg;
  c.output_every_h = 120;
  c.diag_every = 1000000;  // the last step only
  return c;
}

struct Norms {
  double l1, l2, linf;
};
Norms norms(const nlohmann::json& m) { return {m["h_l1"], m["h_l2"], m["h_linf"]}; }

TEST(ClimateWilliamson, Case2ConvergesAtSecondOrder) {
  const int nlats[3] = {24, 48, 96};
  Norms e[3];
  for (int k = 0; k < 3; ++k) {
    const nlohmann::json m = run(case2(nlats[k], 0.0));
    e[k] = norms(m);
    std::printf(
        "case 2, alpha 0, nlat %d (%d steps): l1 %.3e  l2 %.3e  linf %.3e  mass drift %.1e\n",
        nlats[k], int(m["steps"]), e[k].l1, e[k].l2, e[k].linf, double(m["mass_drift"]));
    EXPECT_LT(std::abs(double(m["mass_drift"])), 1e-13);
  }
  const double o1 = std::log2(e[1].l1 / e[2].l1), o2 = std::log2(e[1].l2 / e[2].l2),
               oinf = std::log2(e[1].linf / e[2].linf);
  std::printf("order 48 -> 96: l1 %.2f  l2 %.2f  linf %.2f\n", o1, o2, oinf);
  EXPECT_GT(o1, 1.8);
  EXPECT_GT(o2, 1.8);
  // linf sits in a polar row, where the meridional gradient is one-sided.
  EXPECT_GT(oinf, 1.0);
  EXPECT_LT(e[2].l2, 2e-4);
  EXPECT_LT(e[2].linf, 2e-3);
}

TEST(ClimateWilliamson, Case2TiltedOverThePolesConverges) {
  Norms e[2];
  const int nlats[2] = {24, 48};
  for (int k = 0; k < 2; ++k) {
    e[k] = norms(run(case2(nlats[k], 45.0)));
    std::printf("case 2, alpha 45, nlat %d: l1 %.3e  l2 %.3e  linf %.3e\n", nlats[k], e[k].l1,
                e[k].l2, e[k].linf);
  }
  EXPECT_GT(std::log2(e[0].l1 / e[1].l1), 1.7);
  EXPECT_GT(std::log2(e[0].l2 / e[1].l2), 1.7);
  EXPECT_LT(e[1].l2, 6e-3);
  // Straight over the poles (alpha = 90): the polar rows carry the flow.
  const Norms polar = norms(run(case2(48, 90.0)));
  std::printf("case 2, alpha 90, nlat 48: l1 %.3e  l2 %.3e  linf %.3e\n", polar.l1, polar.l2,
              polar.linf);
  EXPECT_LT(polar.l2, 2e-3);
  EXPECT_LT(polar.linf, 6e-3);
}

TEST(ClimateWilliamson, Case6ConservesMassToRoundOff) {
  ClimateConfig c;
  c.test_case = 6;
  c.nlat = 36;
  c.days = 14;
  c.output_every_h = 336;
  c.diag_every = 5;
  auto comm = comm::make_single_comm();
  auto w = make_climate_workload(c, *comm, 0);
  ASSERT_TRUE(w.is_ok()) << w.status().message();
  Status s = (*w)->begin(".");
  while (s.is_ok() && (*w)->steps_done() < (*w)->total_steps()) s = (*w)->step();
  ASSERT_TRUE(s.is_ok()) << s.message();
  testutil::TempDir dir("climate_case6");
  auto summary = (*w)->finish(dir.path());
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  const nlohmann::json& r = *summary;
  std::printf(
      "case 6, nlat 36, 14 days (%d steps): mass drift max %.1e, energy %.2e, enstrophy %.2e\n",
      int(r["steps"]), double(r["mass_drift_max_abs"]), double(r["energy_drift"]),
      double(r["enstrophy_drift"]));
  EXPECT_LT(double(r["mass_drift_max_abs"]), 1e-13);
  EXPECT_LT(std::abs(double(r["energy_drift"])), 1e-4);
  EXPECT_LT(std::abs(double(r["enstrophy_drift"])), 1e-2);
  // The wave is still there: the final map has the wavenumber-4 ridges
  // (h spans thousands of metres along a mid-latitude row).
  const nlohmann::json& map = r["maps"].back();
  EXPECT_NEAR(double(map["time_h"]), 336.0, 1e-9);
  const int nx = map["nlon"], row = int(map["nlat"]) * 3 / 4;
  double lo = 1e9, hi = -1e9;
  for (int i = 0; i < nx; ++i) {
    const double v = map["values"][row * nx + i];
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  EXPECT_GT(hi - lo, 500.0);
}

TEST(ClimateWilliamson, Case5ConservesMassOverTheMountain) {
  ClimateConfig c;
  c.test_case = 5;
  c.nlat = 36;
  c.days = 15;
  c.output_every_h = 360;
  c.diag_every = 5;
  const nlohmann::json m = run(c);
  std::printf("case 5, nlat 36, 15 days: mass drift %.1e, energy %.2e, enstrophy %.2e\n",
              double(m["mass_drift"]), double(m["energy_drift"]), double(m["enstrophy_drift"]));
  EXPECT_LT(std::abs(double(m["mass_drift"])), 1e-13);
  EXPECT_LT(std::abs(double(m["energy_drift"])), 1e-4);
  EXPECT_LT(std::abs(double(m["enstrophy_drift"])), 1e-2);
}

// The optional grid-scale damping takes energy out (and not mass); its
// rate is the one the CFL limit allows for.
TEST(ClimateWilliamson, DampingDissipatesEnergyNotMass) {
  ClimateConfig c;
  c.test_case = 6;
  c.nlat = 36;
  c.days = 3;
  c.output_every_h = 72;
  const nlohmann::json plain = run(c);
  c.damping_time_h = 3;
  const nlohmann::json damped = run(c);
  std::printf("case 6, 3 days: energy drift %.2e undamped, %.2e with damping_time_h = 3\n",
              double(plain["energy_drift"]), double(damped["energy_drift"]));
  EXPECT_LT(double(damped["energy_drift"]), 10 * double(plain["energy_drift"]));
  EXPECT_LT(double(damped["energy_drift"]), -1e-4);
  EXPECT_LT(std::abs(double(damped["mass_drift"])), 1e-13);
}

}  // namespace
}  // namespace crucible::sim
