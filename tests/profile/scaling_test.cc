#include "profile/scaling.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "support/cli_runner.h"
#include "support/files.h"

namespace crucible::profile {
namespace {

double amdahl(double s, double n) { return 1 / (s + (1 - s) / n); }

TEST(Amdahl, RecoversSerialFractionFromExactData) {
  std::vector<SpeedupPoint> pts;
  for (double n : {1, 2, 4, 8, 16}) pts.push_back({n, amdahl(0.1, n)});
  AmdahlFit f = fit_amdahl(pts);
  EXPECT_NEAR(f.serial_fraction, 0.1, 1e-9);
  EXPECT_NEAR(f.intercept, 0.1, 1e-9);
  EXPECT_NEAR(f.slope, 0.9, 1e-9);
  EXPECT_NEAR(f.predict(8), amdahl(0.1, 8), 1e-9);
}

TEST(Amdahl, RecoversSerialFractionFromNoisyData) {
  // +-2% measurement noise on every speedup but the base.
  const double noise[] = {1.0, 1.02, 0.98, 1.015, 0.985};
  std::vector<SpeedupPoint> pts;
  int i = 0;
  for (double n : {1, 2, 4, 8, 16}) pts.push_back({n, amdahl(0.1, n) * noise[i++]});
  EXPECT_NEAR(fit_amdahl(pts).serial_fraction, 0.1, 0.01);
}

TEST(Amdahl, NeedsTwoWorldSizes) {
  EXPECT_TRUE(std::isnan(fit_amdahl({{1, 1}}).serial_fraction));
  EXPECT_TRUE(std::isnan(fit_amdahl({{2, 1.5}, {2, 1.6}}).serial_fraction));
}

TEST(KarpFlatt, EqualsSerialFractionOnAmdahlData) {
  for (double s : {0.0, 0.05, 0.1, 0.3})
    for (double n : {2, 3, 4, 8, 64}) EXPECT_NEAR(karp_flatt(n, amdahl(s, n)), s, 1e-12);
  EXPECT_TRUE(std::isnan(karp_flatt(1, 1)));
}

TEST(AnalyzeScaling, SpeedupEfficiencyAgainstSmallestWorld) {
  // Unsorted input; 1000 tok/s on one rank, Amdahl s = 0.1.
  auto r = analyze_scaling({{4, 1000 * amdahl(0.1, 4)}, {1, 1000}, {2, 1000 * amdahl(0.1, 2)}});
  ASSERT_TRUE(r) << r.status().message();
  ASSERT_EQ(r->points.size(), 3u);
  EXPECT_EQ(r->points[0].ranks, 1);
  EXPECT_EQ(r->points[2].ranks, 4);
  EXPECT_NEAR(r->points[2].speedup, 1 / 0.325, 1e-9);  // 0.1 + 0.9/4
  EXPECT_NEAR(r->points[2].efficiency, 1 / 0.325 / 4, 1e-9);
  EXPECT_NEAR(r->points[1].karp_flatt, 0.1, 1e-9);
  EXPECT_TRUE(std::isnan(r->points[0].karp_flatt));
  EXPECT_NEAR(r->fit.serial_fraction, 0.1, 1e-9);
}

TEST(AnalyzeScaling, BaseAboveOneIsTheUnit) {
  // Measured from 2 ranks up: s is then the serial share of the 2-rank step,
  // 0.1 / (0.1 + 0.9/2) = 0.1818..., and efficiency is relative to 2 ranks.
  auto r = analyze_scaling({{2, amdahl(0.1, 2)}, {4, amdahl(0.1, 4)}, {8, amdahl(0.1, 8)}});
  ASSERT_TRUE(r);
  EXPECT_NEAR(r->fit.serial_fraction, 0.1 / 0.55, 1e-9);
  EXPECT_NEAR(r->points[1].karp_flatt, 0.1 / 0.55, 1e-9);
  EXPECT_DOUBLE_EQ(r->points[0].efficiency, 1);
}

TEST(AnalyzeScaling, RejectsBadInput) {
  EXPECT_FALSE(analyze_scaling({}));
  auto dup = analyze_scaling({{2, 10}, {2, 12}});
  ASSERT_FALSE(dup);
  EXPECT_NE(dup.status().message().find("measured twice"), std::string::npos);
  EXPECT_FALSE(analyze_scaling({{1, 10}, {2, 0}}));
}

// A run directory as the trainer leaves it: metrics.jsonl (rank 0's view) and,
// for data-parallel runs, metrics.rank{R}.jsonl.
void make_run(const std::string& dir, int ranks, const std::vector<double>& tokens_per_s) {
  std::filesystem::create_directories(dir);
  std::string lines;
  int step = 0;
  for (double t : tokens_per_s)
    lines += nlohmann::json{{"step", ++step}, {"loss", 5.0}, {"tokens_per_s", t}}.dump() + "\n";
  testutil::write_file(dir + "/metrics.jsonl", lines + "{\"step\": 9");  // torn last line
  if (ranks > 1)
    for (int r = 0; r < ranks; ++r)
      testutil::write_file(dir + "/metrics.rank" + std::to_string(r) + ".jsonl", lines);
}

TEST(ReadScalingRun, MedianAfterSkipAndRanksFromFiles) {
  testutil::TempDir tmp(testutil::current_test_name());
  // First two steps slow (warm-up), then 100, 120, 110, 90, 105: median 105.
  make_run(tmp / "n4", 4, {5, 7, 100, 120, 110, 90, 105});
  auto t = read_scaling_run(tmp / "n4", 0, 2);
  ASSERT_TRUE(t) << t.status().message();
  EXPECT_EQ(t->ranks, 4);
  EXPECT_DOUBLE_EQ(t->tokens_per_s, 105);
  EXPECT_EQ(t->steps_used, 5);
  make_run(tmp / "n1", 1, {1, 50, 60});
  auto one = read_scaling_run(tmp / "n1", 0, 1);
  ASSERT_TRUE(one);
  EXPECT_EQ(one->ranks, 1);
  EXPECT_DOUBLE_EQ(one->tokens_per_s, 55);
  EXPECT_EQ(read_scaling_run(tmp / "n1", 8, 1)->ranks, 8);  // given ranks win
  auto none = read_scaling_run(tmp / "n1", 0, 3);
  ASSERT_FALSE(none);
  EXPECT_NE(none.status().message().find("no step after skipping"), std::string::npos);
  EXPECT_FALSE(read_scaling_run(tmp / "missing", 0, 0));
}

TEST(BenchScalingCli, RunsPathWritesTableAndJson) {
  testutil::TempDir tmp(testutil::current_test_name());
  make_run(tmp / "a", 1, {1, 1000, 1000, 1000});
  make_run(tmp / "b", 2, {1, 1000 * amdahl(0.1, 2), 1000 * amdahl(0.1, 2), 1000 * amdahl(0.1, 2)});
  make_run(tmp / "c", 4, {1, 1000 * amdahl(0.1, 4), 1000 * amdahl(0.1, 4), 1000 * amdahl(0.1, 4)});
  auto r = e2e::run_crucible({"bench", "scaling", "--runs", tmp / "c", tmp / "a", tmp / "b",
                              "--skip", "1", "--out", tmp / "scaling.json"});
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("Karp-Flatt"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("serial fraction 0.100"), std::string::npos) << r.output;
  auto j = nlohmann::json::parse(testutil::read_file(tmp / "scaling.json"));
  ASSERT_EQ(j["points"].size(), 3u);
  EXPECT_EQ(j["points"][0]["ranks"], 1);
  EXPECT_TRUE(j["points"][0]["karp_flatt"].is_null());
  EXPECT_EQ(j["points"][2]["ranks"], 4);
  EXPECT_NEAR(j["points"][2]["speedup"].get<double>(), 1 / 0.325, 1e-9);
  EXPECT_NEAR(j["points"][2]["karp_flatt"].get<double>(), 0.1, 1e-9);
  EXPECT_NEAR(j["serial_fraction"].get<double>(), 0.1, 1e-9);
  EXPECT_EQ(j["ideal"][2]["speedup"], 4.0);
}

TEST(BenchScalingCli, MissingRunIsExitTwo) {
  testutil::TempDir tmp(testutil::current_test_name());
  auto r = e2e::run_crucible({"bench", "scaling", "--runs", tmp / "nope", "--out", tmp / "s.json"});
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("[bench] scaling: no "), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(tmp / "s.json"));
}

}  // namespace
}  // namespace crucible::profile
