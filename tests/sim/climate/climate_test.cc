// The climate workload's contract: config validation and the factory's
// refusals (each naming its key, the CFL limit named), resume from a
// checkpoint bit-identical to an uninterrupted run, determinism over thread
// counts, CF NetCDF output that ncdump reads, and the report's maps.
#include "sim/climate/climate.h"

#include <gtest/gtest.h>
#include <netcdf.h>
#include <omp.h>

#include <cstdio>
#include <functional>
#include <string>

#include "comm/comm.h"
#include "sim/climate/grid.h"
#include "sim/climate/summary_maps.h"
#include "support/files.h"

namespace crucible::sim {
namespace {

using testutil::TempDir;

ClimateConfig small(int test_case) {
  ClimateConfig c;
  c.test_case = test_case;
  c.nlat = 16;
  c.days = 1;
  c.output_every_h = 6;
  c.diag_every = 3;
  if (test_case == 2) c.alpha_deg = 30;
  return c;
}

std::unique_ptr<Workload> make(const ClimateConfig& c, comm::Comm& comm) {
  auto w = make_climate_workload(c, comm, 7);
  EXPECT_TRUE(w.is_ok()) << w.status().message();
  return w ? std::move(*w) : nullptr;
}

void advance_to(Workload& w, int64_t step) {
  while (w.steps_done() < step) ASSERT_TRUE(w.step().is_ok());
}

void expect_same_state(const State& a, const State& b) {
  EXPECT_EQ(a.scalars.dump(), b.scalars.dump());
  ASSERT_EQ(a.arrays.size(), b.arrays.size());
  for (size_t k = 0; k < a.arrays.size(); ++k) {
    EXPECT_EQ(a.arrays[k].name, b.arrays[k].name);
    EXPECT_EQ(a.arrays[k].shape, b.arrays[k].shape);
    EXPECT_TRUE(a.arrays[k].bytes == b.arrays[k].bytes)
        << "array " << a.arrays[k].name << " differs";
  }
}

TEST(ClimateConfigTest, ValidateNamesEachBadKey) {
  EXPECT_TRUE(validate_climate(ClimateConfig{}).is_ok());
  const std::vector<std::pair<std::function<void(ClimateConfig&)>, std::string>> bad = {
      {[](ClimateConfig& c) { c.test_case = 3; }, "climate.case"},
      {[](ClimateConfig& c) { c.nlat = 7; }, "climate.nlat"},
      {[](ClimateConfig& c) { c.nlat = 31; }, "climate.nlat"},
      {[](ClimateConfig& c) { c.days = 0; }, "climate.days"},
      {[](ClimateConfig& c) { c.dt_s = -1; }, "climate.dt_s"},
      {[](ClimateConfig& c) { c.test_case = 2, c.alpha_deg = 120; }, "climate.alpha_deg"},
      {[](ClimateConfig& c) { c.alpha_deg = 10; }, "climate.alpha_deg"},  // case 6 has no alpha
      {[](ClimateConfig& c) { c.polar_filter_lat_deg = 20; }, "climate.polar_filter_lat_deg"},
      {[](ClimateConfig& c) { c.damping_time_h = -1; }, "climate.damping_time_h"},
      {[](ClimateConfig& c) { c.output_every_h = 0; }, "climate.output_every_h"},
      {[](ClimateConfig& c) { c.output_every_h = 0.1; },
       "climate.output_every_h"},  // > 1000 snapshots
      {[](ClimateConfig& c) { c.diag_every = 0; }, "climate.diag_every"},
  };
  auto comm = comm::make_single_comm();
  for (const auto& [mutate, key] : bad) {
    ClimateConfig c;
    mutate(c);
    Status s = validate_climate(c);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << key;
    EXPECT_EQ(s.message().rfind("[config] " + key + ":", 0), 0u) << s.message();
    EXPECT_EQ(s.message().find('\n'), std::string::npos);
    auto w = make_climate_workload(c, *comm, 0);  // the factory refuses it too
    EXPECT_FALSE(w.is_ok());
  }
}

TEST(ClimateConfigTest, FieldsBindEveryKeyOnce) {
  ClimateConfig c;
  std::vector<config::Field> f = climate_fields(c);
  EXPECT_EQ(f.size(), 9u);
  for (const config::Field& x : f) EXPECT_EQ(std::string(x.key).rfind("climate.", 0), 0u) << x.key;
}

// The CFL limit in the refusal is the true boundary: just under it the
// factory accepts, just over it refuses; the polar filter raises it.
TEST(ClimateFactoryTest, RefusesATimeStepOverTheCflLimit) {
  auto comm = comm::make_single_comm();
  ClimateConfig c;
  c.nlat = 24;
  c.dt_s = 1e5;
  auto w = make_climate_workload(c, *comm, 0);
  ASSERT_FALSE(w.is_ok());
  const std::string msg = w.status().message();
  std::printf("%s\n", msg.c_str());  // quoted in docs/sim/climate.md
  EXPECT_EQ(w.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(msg.rfind("[config] climate.dt_s: 100000 s exceeds the CFL limit ", 0), 0u) << msg;
  EXPECT_NE(msg.find("polar filter from 60 deg"), std::string::npos) << msg;
  const double limit = std::stod(msg.substr(msg.find("CFL limit ") + 10));
  ASSERT_GT(limit, 100);
  c.dt_s = limit - 1;
  EXPECT_TRUE(make_climate_workload(c, *comm, 0).is_ok());
  c.dt_s = limit + 1;
  EXPECT_FALSE(make_climate_workload(c, *comm, 0).is_ok());
  // Without the filter the polar row's 1.4 km cells bind the step.
  c.polar_filter_lat_deg = 90;
  c.dt_s = 1e5;
  auto unfiltered = make_climate_workload(c, *comm, 0);
  ASSERT_FALSE(unfiltered.is_ok());
  const std::string m2 = unfiltered.status().message();
  const double limit_unfiltered = std::stod(m2.substr(m2.find("CFL limit ") + 10));
  EXPECT_LT(limit_unfiltered * 5, limit) << m2;
}

TEST(ClimateFactoryTest, AutomaticStepDividesTheRun) {
  auto comm = comm::make_single_comm();
  ClimateConfig c = small(6);
  auto w = make(c, *comm);
  ASSERT_TRUE(w);
  ASSERT_TRUE(w->begin(".").is_ok());
  advance_to(*w, w->total_steps());
  EXPECT_NEAR(double(w->metrics()["sim_time_h"]), 24.0, 1e-9);
}

// A run saved at step k and resumed in a fresh workload ends bit for bit
// where an uninterrupted one does: fields, diagnostics, snapshots, the
// summary and climate.nc.
TEST(ClimateResumeTest, ResumeIsBitIdentical) {
  for (int test_case : {2, 5}) {
    auto comm = comm::make_single_comm();
    const ClimateConfig c = small(test_case);
    TempDir d1("climate_resume_a"), d2("climate_resume_b");
    auto a = make(c, *comm);
    ASSERT_TRUE(a && a->begin(d1.path()).is_ok());
    advance_to(*a, a->total_steps());
    auto state_a = a->save();
    ASSERT_TRUE(state_a.is_ok());

    const int64_t k = a->total_steps() / 2 + 1;  // not a diagnostic or snapshot step
    auto b = make(c, *comm);
    ASSERT_TRUE(b && b->begin(d2.path()).is_ok());
    advance_to(*b, k);
    auto mid = b->save();
    ASSERT_TRUE(mid.is_ok());
    b.reset();
    auto resumed = make(c, *comm);
    ASSERT_TRUE(resumed->load(*mid, k).is_ok());
    ASSERT_TRUE(resumed->begin(d2.path()).is_ok());
    EXPECT_EQ(resumed->steps_done(), k);
    advance_to(*resumed, resumed->total_steps());
    auto state_b = resumed->save();
    ASSERT_TRUE(state_b.is_ok());
    expect_same_state(*state_a, *state_b);
    EXPECT_EQ(a->metrics().dump(), resumed->metrics().dump());
    auto sum_a = a->finish(d1.path()), sum_b = resumed->finish(d2.path());
    ASSERT_TRUE(sum_a.is_ok() && sum_b.is_ok());
    EXPECT_EQ(sum_a->dump(), sum_b->dump());
    EXPECT_EQ(testutil::read_file(d1 / "climate.nc"), testutil::read_file(d2 / "climate.nc"));
  }
}

TEST(ClimateResumeTest, LoadRefusesAStateOfAnotherGrid) {
  auto comm = comm::make_single_comm();
  ClimateConfig c = small(6);
  auto w = make(c, *comm);
  ASSERT_TRUE(w->begin(".").is_ok());
  auto st = w->save();
  ASSERT_TRUE(st.is_ok());
  c.nlat = 24;
  auto other = make(c, *comm);
  Status s = other->load(*st, 0);
  EXPECT_EQ(s.code(), Code::kCorrupt);
  EXPECT_NE(s.message().find("nlat 16"), std::string::npos) << s.message();
  EXPECT_FALSE(other->load(*st, other->total_steps() + 1).is_ok());
  // The same grid, a damaged array: named.
  c.nlat = 16;
  State bad = *st;
  for (StateArray& a : bad.arrays)
    if (a.name == "h") a.bytes.resize(a.bytes.size() / 2);
  Status s2 = make(c, *comm)->load(bad, 0);
  EXPECT_EQ(s2.code(), Code::kCorrupt);
  EXPECT_NE(s2.message().find("'h'"), std::string::npos) << s2.message();
}

TEST(ClimateDeterminismTest, ThreadCountDoesNotChangeTheFields) {
  auto comm = comm::make_single_comm();
  const ClimateConfig c = small(2);
  const int saved = omp_get_max_threads();
  std::vector<State> states;
  for (int threads : {1, 2, 3}) {
    omp_set_num_threads(threads);
    auto w = make(c, *comm);
    ASSERT_TRUE(w->begin(".").is_ok());
    advance_to(*w, w->total_steps());
    auto st = w->save();
    ASSERT_TRUE(st.is_ok());
    states.push_back(*st);
  }
  omp_set_num_threads(saved);
  expect_same_state(states[0], states[1]);
  expect_same_state(states[0], states[2]);
}

std::string run_command(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  pclose(p);
  return out;
}

TEST(ClimateNetcdfTest, WritesCfThatNcdumpReads) {
  auto comm = comm::make_single_comm();
  ClimateConfig c = small(5);
  c.output_every_h = 12;  // t = 0, 12, 24 h
  TempDir dir("climate_nc");
  auto w = make(c, *comm);
  ASSERT_TRUE(w->begin(dir.path()).is_ok());
  advance_to(*w, w->total_steps());
  auto st = w->save();
  auto summary = w->finish(dir.path());
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  EXPECT_EQ((*summary)["output"], "climate.nc");
  const std::string path = dir / "climate.nc";
  const std::string header = run_command("ncdump -h '" + path + "' 2>&1");
  for (const char* want :
       {":Conventions = \"CF-1.8\"", "time = 3 ;", "lat = 16 ;", "lon = 32 ;", "double lat(lat) ;",
        "lat:units = \"degrees_north\"", "lat:standard_name = \"latitude\"",
        "lon:units = \"degrees_east\"", "lon:standard_name = \"longitude\"",
        "time:units = \"hours since 2000-01-01 00:00:00\"", "time:standard_name = \"time\"",
        "float h(time, lat, lon) ;", "h:units = \"m\"", "u:standard_name = \"eastward_wind\"",
        "v:standard_name = \"northward_wind\"", "v:units = \"m s-1\"",
        "hs:standard_name = \"surface_altitude\"", ":williamson_case = 5",
        ":title = \"Shallow-water"})
    EXPECT_NE(header.find(want), std::string::npos) << "missing '" << want << "' in\n" << header;
  // The values: the last time's h is the final state, as float.
  int id, var;
  ASSERT_EQ(nc_open(path.c_str(), NC_NOWRITE, &id), NC_NOERR);
  ASSERT_EQ(nc_inq_varid(id, "h", &var), NC_NOERR);
  std::vector<float> h(16 * 32);
  const size_t start[3] = {2, 0, 0}, count[3] = {1, 16, 32};
  ASSERT_EQ(nc_get_vara_float(id, var, start, count, h.data()), NC_NOERR);
  double t[3];
  ASSERT_EQ(nc_inq_varid(id, "time", &var), NC_NOERR);
  ASSERT_EQ(nc_get_var_double(id, var, t), NC_NOERR);
  nc_close(id);
  EXPECT_EQ(t[0], 0.0);
  EXPECT_NEAR(t[1], 12.0, 1e-9);
  EXPECT_NEAR(t[2], 24.0, 1e-9);
  std::vector<double> final_h;
  ASSERT_TRUE(unpack_f64(*st, "h", 16 * 32, &final_h).is_ok());
  for (size_t k = 0; k < h.size(); ++k) ASSERT_EQ(h[k], float(final_h[k])) << k;
}

TEST(ClimateNetcdfTest, UnwritableDirectoryIsAnIoErrorNamingTheFile) {
  auto comm = comm::make_single_comm();
  auto w = make(small(6), *comm);
  ASSERT_TRUE(w->begin(".").is_ok());
  advance_to(*w, w->total_steps());
  auto r = w->finish("/nonexistent/dir");
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("/nonexistent/dir/climate.nc"), std::string::npos)
      << r.status().message();
}

TEST(ClimateMapsTest, DownsamplesToTheReportsSize) {
  using namespace climate;
  EXPECT_EQ(map_snapshot_indices(1), (std::vector<size_t>{0}));
  EXPECT_EQ(map_snapshot_indices(3), (std::vector<size_t>{0, 1, 2}));
  EXPECT_EQ(map_snapshot_indices(15), (std::vector<size_t>{0, 5, 9, 14}));
  for (int nlat : {16, 96, 144, 100}) {
    const Grid g(nlat);
    const size_t plane = size_t(nlat) * g.nlon;
    std::vector<double> snaps(3 * plane, 0.0);
    for (size_t k = 0; k < plane; ++k)
      snaps[k] = 1000.0 + (k / g.nlon) % 2;  // h: rows alternate 1000, 1001
    const nlohmann::json maps = height_maps(g, snaps, {{12.0, 0}}, nullptr);
    ASSERT_EQ(maps.size(), 1u);
    const nlohmann::json& m = maps[0];
    const int ny = m["nlat"], nx = m["nlon"];
    EXPECT_LE(ny, 72);
    EXPECT_LE(nx, 144);
    EXPECT_EQ(nx, 2 * ny);
    EXPECT_EQ(m["values"].size(), size_t(ny) * nx);
    EXPECT_EQ(m["field"], "h");
    EXPECT_DOUBLE_EQ(double(m["dlat"]) * ny, 180.0);
    EXPECT_DOUBLE_EQ(double(m["lat0"]), -90.0 + double(m["dlat"]) / 2);
    for (const auto& v : m["values"]) {
      EXPECT_GE(double(v), 1000.0);
      EXPECT_LE(double(v), 1001.0);
    }
  }
}

}  // namespace
}  // namespace crucible::sim
