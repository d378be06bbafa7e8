// `crucible sim` as a user runs it, for every workload (real processes, real
// files, Open MPI ranks under `crucible launch`):
//   - 1 rank and 2 ranks give the same results (bit for bit where the
//     workload promises it: the members compared below);
//   - a rank killed mid-run under `launch` is restarted by the supervisor from
//     the newest checkpoint, and the job ends with the uninterrupted result;
//   - SIGTERM-style stops (--stop-at) and `--resume` continue to that result;
//   - each bad config is one line naming the problem, exit 2, nothing written.
// Sizes are each workload's smallest meaningful problem (seconds).
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "sim/registry.h"
#include "support/cli_runner.h"

namespace crucible::e2e {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct BadCase {
  std::vector<std::string> overrides;
  std::string says;  // a piece of the one line
};

struct WorkloadCase {
  std::string name;
  std::vector<std::string> small;    // --set overrides: a problem of seconds
  std::vector<std::string> compare;  // results.json members that must match exactly ("a.b": nested)
  int64_t kill_at = 0;               // a step inside the run (with ckpt.every below it)
  int64_t ckpt_every = 0;
  std::vector<BadCase> bad;
};

// gtest prints a parameter in test names and failures: its workload's name.
void PrintTo(const WorkloadCase& c, std::ostream* os) { *os << c.name; }

std::vector<WorkloadCase> cases() {
  std::vector<WorkloadCase> all;
  all.push_back({"risk",
                 {"risk.scenarios=200000", "risk.batch=20000"},
                 {"var_99", "es_99", "var_99_9", "es_99_9", "var_99_se", "tail_p_is", "loss_mean"},
                 6,
                 2,
                 {{{"risk.market.correlation=[1,1,0,0, 1,1,0,0, 0,0,1,0, 0,0,0,1]"}, "correlation"},
                  {{"risk.instruments=[\"swaption,SPX,100\"]"}, "swaption"},
                  {{"risk.market.vols=[0.18,-0.2,0.25]"}, "vol"},
                  {{"risk.scenarios=0"}, "risk.scenarios"}}});
  all.push_back({"climate",
                 {"climate.case=6", "climate.nlat=24", "climate.days=1", "climate.output_every_h=6"},
                 {"mass_drift", "energy_drift", "enstrophy_drift", "steps"},
                 20,
                 8,
                 {{{"climate.dt_s=5000"}, "climate.dt_s"},
                  {{"climate.case=3"}, "climate.case"},
                  {{"climate.nlat=3"}, "climate.nlat"}}});
  all.push_back({"md",
                 {"md.cells=5", "md.steps=300", "md.equil_steps=100", "md.reproducible=true", "md.dump_every=50"},
                 {"pressure_mean", "pe_per_atom_mean", "temperature_mean", "energy_drift_per_atom_per_step"},
                 150,
                 50,
                 {{{"md.dt=0"}, "md.dt"},
                  {{"md.cells=2"}, "smaller than two cut-offs"},
                  {{"md.density=20"}, "overlapping atoms"},
                  {{"md.start_file=/nonexistent.xyz"}, "md.start_file"}}});
  return all;
}

std::vector<std::string> with(std::vector<std::string> base, const std::vector<std::string>& overrides) {
  for (const std::string& o : overrides) base.insert(base.end(), {"--set", o});
  return base;
}

json member(const json& j, const std::string& path) {
  const json* at = &j;
  size_t from = 0;
  for (size_t dot; (dot = path.find('.', from)) != std::string::npos; from = dot + 1) {
    const std::string k = path.substr(from, dot - from);
    if (!at->contains(k)) return nullptr;
    at = &(*at)[k];
  }
  const std::string k = path.substr(from);
  return at->contains(k) ? (*at)[k] : json();
}

json results(const std::string& run) {
  json j = json::parse(read_file(run + "/results.json"), nullptr, false);
  EXPECT_TRUE(j.is_object()) << run << "/results.json";
  return j;
}

void expect_same(const WorkloadCase& c, const json& a, const json& b, const std::string& what) {
  for (const std::string& key : c.compare) {
    EXPECT_FALSE(member(a, key).is_null()) << c.name << ": results.json lacks " << key;
    EXPECT_EQ(member(a, key), member(b, key)) << c.name << " " << what << ": " << key;
  }
}

class SimCli : public ::testing::TestWithParam<WorkloadCase> {};

TEST_P(SimCli, RanksRestartsAndResumesGiveTheSameResult) {
  const WorkloadCase& c = GetParam();
  TempDir tmp("sim_cli_" + c.name);
  const std::string one = tmp / "one", two = tmp / "two", killed = tmp / "killed", stopped = tmp / "stopped";
  auto a = run_crucible(with({"sim", c.name, "--run-dir", one}, c.small));
  ASSERT_EQ(a.code, 0) << a.output;
  const json ref = results(one);
  EXPECT_TRUE(fs::exists(one + "/report.html"));
  EXPECT_TRUE(fs::exists(one + "/trace.json"));

  auto b = run_crucible(with({"launch", "-n", "2", "--threads", "1", "--", "sim", c.name, "--run-dir", two}, c.small));
  ASSERT_EQ(b.code, 0) << b.output;
  EXPECT_EQ(results(two).value("ranks", 0), 2);
  expect_same(c, ref, results(two), "2 ranks vs 1");

  // Rank 1 killed at kill_at; the supervisor restarts the job from the
  // newest checkpoint and it finishes with the same result.
  std::vector<std::string> kill = c.small;
  kill.push_back("ckpt.every=" + std::to_string(c.ckpt_every));
  kill.push_back("fault.inject=kill@" + std::to_string(c.kill_at) + ":rank=1");
  kill.push_back("fault.restart_backoff_s=0");
  auto k = run_crucible(with({"launch", "-n", "2", "--threads", "1", "--", "sim", c.name, "--run-dir", killed}, kill));
  ASSERT_EQ(k.code, 0) << k.output;
  const std::string events = read_file(killed + "/events.jsonl");
  EXPECT_NE(events.find("\"failure\""), std::string::npos) << events;
  expect_same(c, ref, results(killed), "after a kill and restart");

  // Stopped by --stop-at, then --resume.
  auto s = run_crucible(with({"sim", c.name, "--run-dir", stopped, "--stop-at", std::to_string(c.kill_at)}, c.small));
  ASSERT_EQ(s.code, 0) << s.output;
  EXPECT_FALSE(fs::exists(stopped + "/results.json"));
  auto r = run_crucible(with({"sim", c.name, "--run-dir", stopped, "--resume"}, c.small));
  ASSERT_EQ(r.code, 0) << r.output;
  expect_same(c, ref, results(stopped), "stopped and resumed");
}

TEST_P(SimCli, BadConfigsAreOneLineAndLeaveNothing) {
  const WorkloadCase& c = GetParam();
  TempDir tmp("sim_cli_bad_" + c.name);
  ASSERT_FALSE(c.bad.empty());
  for (const BadCase& bad : c.bad) {
    const std::string run = tmp / "run";
    auto r = run_crucible(with({"sim", c.name, "--run-dir", run}, bad.overrides));
    EXPECT_EQ(r.code, 2) << r.output;
    EXPECT_NE(r.output.find(bad.says), std::string::npos) << "expected '" << bad.says << "' in: " << r.output;
    EXPECT_FALSE(fs::exists(run)) << c.name << ": a refused config left " << run;
    EXPECT_LE(std::count(r.output.begin(), r.output.end(), '\n'), 1) << "one line: " << r.output;
  }
}

INSTANTIATE_TEST_SUITE_P(Workloads, SimCli, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<WorkloadCase>& i) { return i.param.name; });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(SimCli);

TEST(SimCliCommon, UnknownWorkloadsAndKeysAreRefused) {
  auto r = run_crucible({"sim", "weather"});
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("unknown workload 'weather'"), std::string::npos) << r.output;
  for (const std::string& name : sim::kind_names()) {
    auto k = run_crucible({"sim", name, "--set", "run.nonsense=1"});
    EXPECT_EQ(k.code, 2) << k.output;
    EXPECT_NE(k.output.find("run.nonsense"), std::string::npos) << k.output;
  }
}

}  // namespace
}  // namespace crucible::e2e
