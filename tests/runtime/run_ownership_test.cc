// One owner per directory: two jobs on one run directory, two curations into
// one output, two runs building one dataset cache entry, each started 20
// times with a random offset between them. Whatever the interleaving, at most
// one job writes the directory; the other is refused at once with one line
// naming the holder (or, for the cache, waits for it), and what is left is
// one whole, consistent result.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <thread>

#include "support/cli_runner.h"
#include "support/kernel_harness.h"
#include "support/train_config.h"

namespace crucible::e2e {
namespace {

namespace fs = std::filesystem;

constexpr int kTrials = 20;

std::mt19937& rng() {
  static std::mt19937 r(unsigned(testing::test_seed()));
  return r;
}


std::string small_config(const TempDir& dir) { return testutil::write_small_config(dir, testutil::short_run()); }

// The run in `run` is one whole run of `steps` steps.
void expect_one_whole_run(const std::string& run, int steps) {
  std::vector<int64_t> want;
  for (int i = 1; i <= steps; ++i) want.push_back(i);
  EXPECT_EQ(metric_steps(run), want);
  char latest[32];
  std::snprintf(latest, sizeof latest, "step_%07d\n", steps);
  EXPECT_EQ(read_file(run + "/ckpt/latest"), latest);
  EXPECT_NE(read_file(run + "/config.toml").find("steps = " + std::to_string(steps)), std::string::npos);
}

bool refused_as_owned(const std::string& out) {
  return out.find("is in use by crucible") != std::string::npos ||
         out.find("already holds a") != std::string::npos;
}

// A `first` job in the background, then after a random 0-600 ms a second
// `crucible train` with other steps and seed on the same directory.
void race(const TempDir& dir, const std::string& cfg, const std::vector<std::string>& first,
          int first_steps, const std::string& run, int trial) {
  const int offset_ms = int(rng()() % 600);
  SCOPED_TRACE("trial " + std::to_string(trial) + ", second started after " + std::to_string(offset_ms) + " ms");
  Background a(first, dir.path(), dir / "first.log");
  std::this_thread::sleep_for(std::chrono::milliseconds(offset_ms));
  auto b = run_crucible({"train", cfg, "--run-dir", run, "--set", "train.steps=6", "--set",
                         "train.seed=5"},
                        dir.path());
  const int a_code = a.wait();
  const std::string a_out = read_file(a.log);
  ASSERT_TRUE((a_code == 0) != (b.code == 0)) << "first: " << a_code << "\n" << a_out << "\nsecond: " << b.code
                                              << "\n" << b.output;
  const std::string& loser = a_code == 0 ? b.output : a_out;
  EXPECT_EQ(a_code == 0 ? b.code : a_code, 2);
  EXPECT_TRUE(refused_as_owned(loser)) << loser;
  expect_one_whole_run(run, a_code == 0 ? first_steps : 6);
}

TEST(RunOwnership, TwoTrainsOnOneRunDirectory) {
  TempDir dir("own_train");
  const std::string cfg = small_config(dir);
  for (int t = 0; t < kTrials; ++t) {
    const std::string run = dir / ("run" + std::to_string(t));
    race(dir, cfg, {"train", cfg, "--run-dir", run}, 8, run, t);
  }
}

TEST(RunOwnership, LaunchAndTrainOnOneRunDirectory) {
  TempDir dir("own_launch");
  ::setenv("ASAN_OPTIONS", "detect_leaks=0", 1);  // Open MPI's own leaks (dist_train_test.cc)
  const std::string cfg = small_config(dir);
  for (int t = 0; t < kTrials; ++t) {
    const std::string run = dir / ("run" + std::to_string(t));
    race(dir, cfg, {"launch", "-n", "2", "--threads", "1", "--", "train", cfg, "--run-dir", run}, 8, run, t);
    // The supervisor's account is of its own job: none when it was refused.
    if (metric_steps(run).size() == 6u)
      EXPECT_FALSE(fs::exists(run + "/job.json")) << read_file(run + "/job.json");
    else
      EXPECT_EQ(nlohmann::json::parse(read_file(run + "/job.json")).value("state", ""), "finished")
          << read_file(run + "/events.jsonl") << read_file(dir / "first.log");
  }
}

TEST(RunOwnership, TwoCurationsIntoOneOutput) {
  TempDir dir("own_curate");
  fs::create_directories(dir / "in");
  fs::copy_file("/usr/share/games/fortunes/computers", dir / "in/computers");
  auto ref = run_crucible({"curate", "in", "-o", "ref"}, dir.path());
  ASSERT_EQ(ref.code, 0) << ref.output;
  const auto kept = nlohmann::json::parse(read_file(dir / "ref/report.json"))["output"];
  for (int t = 0; t < kTrials; ++t) {
    const int offset_ms = int(rng()() % 150);
    SCOPED_TRACE("trial " + std::to_string(t) + ", offset " + std::to_string(offset_ms) + " ms");
    const std::string out = "out" + std::to_string(t);
    Background a({"curate", "in", "-o", out}, dir.path(), dir / "a.log");
    std::this_thread::sleep_for(std::chrono::milliseconds(offset_ms));
    auto b = run_crucible({"curate", "in", "-o", out}, dir.path());
    const int a_code = a.wait();
    const std::string a_out = read_file(a.log);
    ASSERT_TRUE(a_code == 0 || b.code == 0) << a_out << "\n" << b.output;
    for (auto [code, text] : {std::pair{a_code, a_out}, std::pair{b.code, b.output}}) {
      if (code == 0) continue;
      EXPECT_EQ(code, 2) << text;
      EXPECT_NE(text.find("is in use by crucible curate"), std::string::npos) << text;
    }
    // Whoever won, OUT is one whole curation, the same as the reference.
    EXPECT_EQ(nlohmann::json::parse(read_file(dir / out + "/report.json"))["output"], kept);
    EXPECT_FALSE(fs::exists(dir / out + "/.work"));
  }
}

TEST(RunOwnership, TwoRunsBuildingOneDatasetCacheEntry) {
  TempDir dir("own_cache");
  testutil::SmallRun r;
  r.steps = 2;
  r.ckpt_every = 2;
  r.sample_tokens = 0;
  const std::string cfg = testutil::write_small_config(dir, r);
  std::string entry;
  for (int t = 0; t < kTrials; ++t) {
    fs::remove_all(dir / "data");
    const int offset_ms = int(rng()() % 300);
    SCOPED_TRACE("trial " + std::to_string(t) + ", offset " + std::to_string(offset_ms) + " ms");
    Background a({"train", cfg, "--run-dir", dir / ("a" + std::to_string(t))}, dir.path(), dir / "a.log");
    std::this_thread::sleep_for(std::chrono::milliseconds(offset_ms));
    auto b = run_crucible({"train", cfg, "--run-dir", dir / ("b" + std::to_string(t))}, dir.path());
    const int a_code = a.wait();
    ASSERT_EQ(a_code, 0) << read_file(a.log);
    ASSERT_EQ(b.code, 0) << b.output;
    // One dataset, built once; no build directory left behind.
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir / "data"))
      if (e.path().filename().string()[0] != '.') names.push_back(e.path().filename().string());
    ASSERT_EQ(names.size(), 1u) << ::testing::PrintToString(names);
    entry = names[0];
    EXPECT_NE((read_file(a.log) + b.output).find("using cached dataset"), std::string::npos);
  }
  // A build killed mid-way leaves DIR.tmp.PID; the next build removes it.
  fs::remove_all(dir / ("data/" + entry));
  fs::create_directories(dir / ("data/" + entry + ".tmp.999999"));
  testutil::write_file(dir / ("data/" + entry + ".tmp.999999/tokenizer.model"), "half");
  auto again = run_crucible({"train", cfg, "--run-dir", dir / "again"}, dir.path());
  ASSERT_EQ(again.code, 0) << again.output;
  EXPECT_NE(again.output.find("left by an interrupted build"), std::string::npos) << again.output;
  EXPECT_FALSE(fs::exists(dir / ("data/" + entry + ".tmp.999999")));
}

}  // namespace
}  // namespace crucible::e2e
