// Energy meters (profile/energy.h) on powercap trees written here — the
// layout Linux gives RAPL (top-level package domains, their sub-domains, a
// psys domain that must not be added) — and a training run measured through
// one whose counter a thread advances at a known power: its rows' joules sum
// to power × time, and the report shows them.
#include "profile/energy.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>

#include "support/cli_runner.h"
#include "support/files.h"
#include "support/train_config.h"

namespace crucible::profile {
namespace {

namespace fs = std::filesystem;
using testutil::TempDir;
using testutil::write_file;

void domain(const std::string& root, const std::string& dir, const std::string& name,
            double range_uj, double energy_uj) {
  fs::create_directories(root + "/" + dir);
  write_file(root + "/" + dir + "/name", name + "\n");
  write_file(root + "/" + dir + "/max_energy_range_uj", std::to_string(uint64_t(range_uj)) + "\n");
  write_file(root + "/" + dir + "/energy_uj", std::to_string(uint64_t(energy_uj)) + "\n");
}

void set_counter(const std::string& root, const std::string& dir, double energy_uj) {
  const std::string path = root + "/" + dir + "/energy_uj";
  write_file(path + ".new", std::to_string(uint64_t(energy_uj)) + "\n");
  fs::rename(path + ".new", path);  // a reader sees the old value or the new, never half
}

TEST(Energy, RaplSumsThePackagesAndCorrectsAWrap) {
  TempDir dir("rapl");
  const std::string root = dir.path();
  domain(root, "intel-rapl:0", "package-0", 1e6, 999000);
  domain(root, "intel-rapl:0:0", "core", 1e6, 5000);  // inside package-0: not added again
  domain(root, "intel-rapl:1", "package-1", 1e9, 3e8);
  domain(root, "intel-rapl:2", "psys", 1e9, 1e8);  // the platform: would count the packages twice
  auto m = EnergyMeter::rapl(root);
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  EXPECT_EQ(m->source(), "RAPL package-0 + package-1");
  EXPECT_EQ(*m->joules(), 0.0);
  set_counter(root, "intel-rapl:0", 500);     // wrapped: 1000 + 500 µJ since
  set_counter(root, "intel-rapl:1", 3.02e8);  // 2e6 µJ since
  set_counter(root, "intel-rapl:0:0", 0);
  set_counter(root, "intel-rapl:2", 9e8);
  EXPECT_NEAR(*m->joules(), (1500 + 2e6) * 1e-6, 1e-9);
  set_counter(root, "intel-rapl:0", 2500);
  EXPECT_NEAR(*m->joules(), (3500 + 2e6) * 1e-6, 1e-9);  // monotone, from the meter's start
  EXPECT_FALSE(m->gpu_sample().has_value());
}

TEST(Energy, NoCounterIsNotMeasurableWithTheReason) {
  TempDir dir("no_rapl");
  auto absent = EnergyMeter::rapl(dir / "nowhere");
  ASSERT_FALSE(absent.is_ok());
  EXPECT_NE(absent.status().message().find("not measurable here"), std::string::npos);
  EXPECT_NE(absent.status().message().find(dir / "nowhere"), std::string::npos);
  domain(dir.path(), "intel-rapl:0", "psys", 1e9, 0);  // no package domain
  auto none = EnergyMeter::rapl(dir.path());
  ASSERT_FALSE(none.is_ok());
  EXPECT_NE(none.status().message().find("no RAPL package domain"), std::string::npos);
}

TEST(Energy, AnUnreadableCounterNamesItsFile) {
  TempDir dir("rapl_bad");
  domain(dir.path(), "intel-rapl:0", "package-0", 1e6, 10);
  auto m = EnergyMeter::rapl(dir.path());
  ASSERT_TRUE(m.is_ok());
  write_file(dir / "intel-rapl:0/energy_uj", "garbage\n");
  auto j = m->joules();
  ASSERT_FALSE(j.is_ok());
  EXPECT_NE(j.status().message().find(dir / "intel-rapl:0/energy_uj"), std::string::npos);
  fs::remove(dir / "intel-rapl:0/max_energy_range_uj");
  auto again = EnergyMeter::rapl(dir.path());
  ASSERT_FALSE(again.is_ok());
  EXPECT_NE(again.status().message().find("max_energy_range_uj"), std::string::npos);
}

TEST(Energy, PerTokenFigureIsReadable) {
  EXPECT_EQ(format_energy_per_token(0.00491), "4.91 mJ/tok");
  EXPECT_EQ(format_energy_per_token(1.2), "1.20 J/tok");
}

// A package drawing `watts` from now on: its counter follows the clock,
// wrapping at its range, until stopped.
class SyntheticPackage {
 public:
  SyntheticPackage(const std::string& root, double watts, double range_uj, double start_uj)
      : root_(root), watts_(watts), range_(range_uj), start_(start_uj) {
    domain(root, "intel-rapl:0", "package-0", range_uj, start_uj);
    thread_ = std::thread([this] {
      const auto t0 = std::chrono::steady_clock::now();
      while (!stop_) {
        const double s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        set_counter(root_, "intel-rapl:0", std::fmod(start_ + s * watts_ * 1e6, range_));
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    });
  }
  ~SyntheticPackage() {
    stop_ = true;
    thread_.join();
  }

 private:
  std::string root_;
  double watts_, range_, start_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

TEST(EnergyTrain, EveryStepsJoulesFromTheCounterAddUpToPowerTimesTime) {
  TempDir dir("energy_train");
  testutil::SmallRun run = testutil::short_run();
  run.steps = 40;
  run.batch = 16;
  const std::string cfg = testutil::write_small_config(dir, run);
  const double watts = 150;
  std::string log;
  {
    // 150 W, wrapping 5 s in: a run of a few seconds crosses the wrap.
    SyntheticPackage package(dir / "powercap", watts, 1e9, 1e9 - 5 * watts * 1e6);
    ::setenv("CRUCIBLE_POWERCAP_ROOT", (dir / "powercap").c_str(), 1);
    auto r = e2e::run_crucible({"train", cfg, "--run-dir", dir / "run"});
    ::unsetenv("CRUCIBLE_POWERCAP_ROOT");
    ASSERT_EQ(r.code, 0) << r.output;
    log = r.output;
  }
  EXPECT_NE(log.find("[energy] measuring RAPL package-0"), std::string::npos) << log;
  EXPECT_NE(log.find("mJ/tok"), std::string::npos) << log;  // the progress line shows it
  double joules = 0, ms = 0;
  for (const auto& row : e2e::metric_rows(dir / "run/metrics.jsonl")) {
    ASSERT_TRUE(row.contains("energy_j")) << row.dump();
    const double e = row["energy_j"].get<double>();
    EXPECT_GE(e, 0) << row.dump();
    const double tokens = row["tokens_per_s"].get<double>() * row["step_ms"].get<double>() * 1e-3;
    EXPECT_NEAR(row["j_per_token"].get<double>() * tokens, e, 1e-6 * e + 1e-9) << row.dump();
    joules += e;
    ms += row["step_ms"].get<double>();
  }
  // The counter's 1 ms updates lag each reading by up to 1 ms at both ends
  // of a step: small against the steps' total.
  ASSERT_GT(ms, 100);
  std::printf("[energy] %.2f J over %.0f ms of steps: %.1f W (the counter advances at %.0f W)\n",
              joules, ms, joules / (ms * 1e-3), watts);
  EXPECT_NEAR(joules / (ms * 1e-3), watts, 0.10 * watts)
      << "joules " << joules << " over " << ms << " ms";
  const std::string html = testutil::read_file(dir / "run/report.html");
  EXPECT_NE(html.find("<section id=\"energy\">"), std::string::npos);
  EXPECT_NE(html.find("data-series=\"power_w (step mean)\""), std::string::npos);
  EXPECT_NE(html.find("RAPL package-0"), std::string::npos);
}

TEST(EnergyTrain, WithoutACounterTheRunSaysSoAndRecordsNone) {
  TempDir dir("energy_none");
  const std::string cfg = testutil::write_small_config(dir, testutil::short_run());
  fs::create_directories(dir / "empty");
  ::setenv("CRUCIBLE_POWERCAP_ROOT", (dir / "empty").c_str(), 1);
  auto r = e2e::run_crucible({"train", cfg, "--run-dir", dir / "run"});
  ::unsetenv("CRUCIBLE_POWERCAP_ROOT");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("[energy] not measurable here"), std::string::npos) << r.output;
  for (const auto& row : e2e::metric_rows(dir / "run/metrics.jsonl"))
    EXPECT_FALSE(row.contains("energy_j"));
  const std::string html = testutil::read_file(dir / "run/report.html");
  EXPECT_NE(html.find("Not measured: [energy] not measurable here"), std::string::npos);
}

}  // namespace
}  // namespace crucible::profile
