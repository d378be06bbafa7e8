// The `crucible sim` driver (runtime/sim_run.h) around a toy workload whose
// result depends on every step it took: a Philox random walk. What the
// driver promises any workload: checkpoints of its State at the chosen
// steps, a stopped run that resumes to the uninterrupted result, metrics
// rows 1..N once each, results.json, a report, and bad input that leaves no
// directory behind. The real workloads' own checks live beside them.
#include <gtest/gtest.h>

#include <filesystem>

#include "ckpt/checkpoint.h"
#include "ckpt/state_checkpoint.h"
#include "comm/comm.h"
#include "core/rng.h"
#include "runtime/config_schema.h"
#include "runtime/sim_run.h"
#include "support/cli_runner.h"
#include "support/files.h"

namespace crucible::runtime {
namespace {

namespace fs = std::filesystem;

struct WalkConfig {
  int64_t steps = 12;
  double scale = 1.0;
};

std::vector<config::Field> walk_fields(WalkConfig& c) { return {{"walk.steps", &c.steps}, {"walk.scale", &c.scale}}; }
Status validate_walk(const WalkConfig& c) {
  if (c.steps < 1) return schema::bad("walk.steps", "must be >= 1");
  if (!(c.scale > 0)) return Status::invalid("[sim] walk.scale must be > 0, got " + std::to_string(c.scale));
  return Status::ok();
}

class Walk : public sim::Workload {
 public:
  Walk(const WalkConfig& c, uint64_t seed) : c_(c), seed_(seed) {}
  const char* name() const override { return "walk"; }
  int64_t total_steps() const override { return c_.steps; }
  int64_t steps_done() const override { return done_; }
  Status begin(const std::string&) override { return Status::ok(); }
  Status step() override {
    Rng rng(seed_, 7, uint64_t(done_) * 4);
    x_ += c_.scale * rng.normal();
    path_.push_back(x_);
    ++done_;
    return Status::ok();
  }
  nlohmann::json metrics() const override { return {{"x", x_}}; }
  std::string progress() const override { return "x " + std::to_string(x_); }
  Result<sim::State> save() override {
    sim::State s;
    s.scalars["x"] = x_;
    s.arrays.push_back(sim::pack_f64("path", path_));
    return s;
  }
  Status load(const sim::State& s, int64_t step) override {
    CRUCIBLE_RETURN_IF_ERROR(sim::unpack_f64(s, "path", size_t(step), &path_));
    x_ = s.scalars.value("x", 0.0);
    done_ = step;
    return Status::ok();
  }
  Result<nlohmann::json> finish(const std::string&) override { return nlohmann::json{{"x", x_}, {"steps", done_}}; }

 private:
  WalkConfig c_;
  uint64_t seed_;
  int64_t done_ = 0;
  double x_ = 0;
  std::vector<double> path_;
};

Result<std::unique_ptr<sim::Workload>> make_walk(const WalkConfig& c, comm::Comm&, uint64_t seed) {
  if (c.scale > 1e6) return Status::invalid("[sim] walk.scale " + std::to_string(c.scale) + " is too large");
  return std::unique_ptr<sim::Workload>(new Walk(c, seed));
}

SimPlan walk_plan(const std::string& dir, const std::vector<std::string>& overrides, bool resume = false) {
  SimPlan plan;
  plan.config.workload = "walk";
  plan.config.kind = std::make_shared<sim::KindOf<WalkConfig>>("walk", walk_fields, validate_walk, make_walk);
  plan.config.run.name = "walk";
  plan.config.ckpt.every_s = 0;
  for (const std::string& o : overrides) {
    Status s = schema::apply_override(sim_fields(plan.config), o);
    EXPECT_TRUE(s.is_ok()) << s.message();
  }
  plan.run_dir = dir;
  plan.config.run.dir = dir;
  plan.resume = resume;
  return plan;
}

double final_x(const std::string& run) {
  auto j = nlohmann::json::parse(testutil::read_file(run + "/results.json"));
  return j["x"].get<double>();
}

TEST(SimDriver, StoppedAndResumedRunEndsWhereTheUninterruptedOneDoes) {
  testutil::TempDir tmp("sim_driver");
  Console quiet;
  const std::string whole = tmp / "whole", parts = tmp / "parts";
  auto a = run_sim(walk_plan(whole, {"ckpt.every=5"}), 0, quiet);
  ASSERT_TRUE(a.is_ok()) << a.status().message();
  EXPECT_EQ(a->steps_done, 12);
  EXPECT_FALSE(a->stopped_early);
  // Checkpoints at 5 and 10 (every), and 12 (the end); keep 2.
  auto found = ckpt::find_latest_valid(whole + "/ckpt");
  ASSERT_TRUE(found.is_ok());
  EXPECT_EQ(found->step, 12);
  EXPECT_TRUE(fs::exists(whole + "/ckpt/step_0000010"));
  EXPECT_FALSE(fs::exists(whole + "/ckpt/step_0000005"));
  EXPECT_EQ(e2e::metric_steps(whole), (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}));
  EXPECT_TRUE(fs::exists(whole + "/report.html"));
  EXPECT_NE(testutil::read_file(whole + "/report.html").find("Where the time went"), std::string::npos);

  auto b = run_sim(walk_plan(parts, {"ckpt.every=5"}), 7, quiet);
  ASSERT_TRUE(b.is_ok()) << b.status().message();
  EXPECT_TRUE(b->stopped_early);
  EXPECT_FALSE(fs::exists(parts + "/results.json"));
  auto c = run_sim(walk_plan(parts, {"ckpt.every=5"}, /*resume=*/true), 0, quiet);
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(final_x(parts), final_x(whole));  // bit for bit
  EXPECT_EQ(e2e::metric_steps(parts), e2e::metric_steps(whole));
}

TEST(SimDriver, AResumeOfAnotherProblemIsRefused) {
  testutil::TempDir tmp("sim_driver_other");
  Console quiet;
  ASSERT_TRUE(run_sim(walk_plan(tmp / "run", {}), 4, quiet).is_ok());
  auto r = run_sim(walk_plan(tmp / "run", {"walk.scale=2"}, true), 0, quiet);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find("walk.scale"), std::string::npos) << r.status().message();
  // The driver's own keys may change on resume.
  EXPECT_TRUE(run_sim(walk_plan(tmp / "run", {"ckpt.every=3"}, true), 0, quiet).is_ok());
}

TEST(SimDriver, BadInputLeavesNothingBehind) {
  testutil::TempDir tmp("sim_driver_bad");
  Console quiet;
  auto r = run_sim(walk_plan(tmp / "run", {"walk.scale=1e9"}), 0, quiet);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_FALSE(fs::exists(tmp / "run"));
}

TEST(SimDriver, TheResolvedConfigReadsBackToItself) {
  SimPlan p = walk_plan("runs/x", {"walk.steps=30", "walk.scale=0.1", "ckpt.every=7", "fault.inject=slow@3:ms=1"});
  const std::string text = to_toml(p.config);
  SimPlan q = walk_plan("runs/x", {});
  auto root = schema::parse_toml(text, "resolved");
  ASSERT_TRUE(root.is_ok());
  ASSERT_TRUE(schema::apply_table(sim_fields(q.config), *root, "resolved").is_ok());
  EXPECT_EQ(to_toml(q.config), text);
  EXPECT_EQ(to_json(q.config), to_json(p.config));
}

}  // namespace
}  // namespace crucible::runtime
