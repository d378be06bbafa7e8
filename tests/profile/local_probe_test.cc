// Which probe document a run trusts (profile/machine.h, profile/local_probe.h):
// only one made on this machine and young enough; another machine's is
// named and passed over, and this machine is measured instead, once.
#include "profile/local_probe.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/json_io.h"
#include "profile/machine.h"
#include "support/cli_runner.h"
#include "support/files.h"
#include "support/train_config.h"

namespace crucible::profile {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testutil::TempDir;

const std::string kData = std::string(CRUCIBLE_SOURCE_DIR) + "/tests/profile/data/";

json fixture(const std::string& name) {
  auto j = read_json(kData + name);
  EXPECT_TRUE(j.is_ok()) << name;
  return j ? *j : json();
}

// Sets an environment variable for one scope.
struct ScopedEnv {
  std::string name, old;
  bool had;
  ScopedEnv(const char* n, const std::string& v) : name(n), had(std::getenv(n) != nullptr) {
    if (had) old = std::getenv(n);
    ::setenv(n, v.c_str(), 1);
  }
  ~ScopedEnv() { had ? (void)::setenv(name.c_str(), old.c_str(), 1) : (void)::unsetenv(name.c_str()); }
};

TEST(Machine, IdentityNamesThisMachineAndItsFingerprintIsStable) {
  const json here = machine_identity();
  EXPECT_FALSE(here.value("model_name", "").empty());
  EXPECT_GT(here.value("hardware_threads", 0), 0);
  EXPECT_GT(here.value("memory_bytes", 0.0), 0.0);
  EXPECT_EQ(here["fingerprint"].get<std::string>().size(), 16u);
  EXPECT_EQ(machine_fingerprint(here), here["fingerprint"]);
  EXPECT_EQ(machine_identity()["fingerprint"], here["fingerprint"]);
  // Any field that decides speed changes it; the kernel does not.
  for (const char* k : {"hostname", "model_name"}) {
    json other = here;
    other[k] = "something else";
    EXPECT_NE(machine_fingerprint(other), here["fingerprint"]) << k;
  }
  json other = here;
  other["stepping"] = here.value("stepping", 0) + 1;
  EXPECT_NE(machine_fingerprint(other), here["fingerprint"]);
  other = here;
  other["kernel"] = "Linux 9.9";
  EXPECT_EQ(machine_fingerprint(other), here["fingerprint"]);
}

TEST(Machine, ProbesFromElsewhereOrTooOldAreRefusedWithTheReason) {
  const json here = machine_identity();
  // The EPYC VM's probe.json once committed to the repository: no machine.
  Status s = probe_made_here(fixture("probe_zen3_vm_2026-12-03.json"), here, 30);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("records no machine"), std::string::npos) << s.message();
  s = probe_made_here(fixture("probe_foreign_machine.json"), here, 30);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("another machine"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("xeon-amx-vm"), std::string::npos) << s.message();
  json mine = fixture("probe_zen3_vm_2026-12-03.json");
  mine["machine"] = here;
  mine["created"] = "2020-01-01T00:00:00Z";
  s = probe_made_here(mine, here, 30);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("days old"), std::string::npos) << s.message();
  mine["created"] = "garbage";
  EXPECT_FALSE(probe_made_here(mine, here, 30).is_ok());
  mine["created"] = "2020-01-01T00:00:00Z";
  EXPECT_TRUE(probe_made_here(mine, here, 36500).is_ok());
}

TEST(LocalProbe, AForeignProbeIsPassedOverAndThisMachineMeasuredOnce) {
  TempDir dir("local_probe");
  ScopedEnv cache("CRUCIBLE_CACHE_DIR", dir / "cache");
  fs::copy_file(kData + "probe_foreign_machine.json", dir / "probe.json");
  std::vector<std::string> lines;
  LocalProbeOptions o;
  o.candidates = {dir / "run/probe.json", dir / "probe.json"};
  o.write_to = dir / "run/probe.json";
  o.log = [&](const std::string& m) { lines.push_back(m); };
  fs::create_directories(dir / "run");
  const LocalProbe p = local_probe(o);
  ASSERT_GE(lines.size(), 2u);
  EXPECT_NE(lines[0].find("probe.json not used: it was made on another machine"), std::string::npos) << lines[0];
  EXPECT_EQ(p.source, "measured now");
  EXPECT_EQ(p.doc["machine"]["fingerprint"], machine_identity()["fingerprint"]);
  EXPECT_TRUE(p.doc["compute"]["valid"].get<bool>());
  EXPECT_GT(gemm_ceiling(p.doc, 1, "f32"), 0.0);
  // Kept in the run directory and the machine cache.
  ASSERT_TRUE(fs::exists(dir / "run/probe.json"));
  EXPECT_EQ(read_json(dir / "run/probe.json")->at("created"), p.doc["created"]);
  const std::string cached = dir / "cache/probe-" + machine_identity()["fingerprint"].get<std::string>() + ".json";
  ASSERT_TRUE(fs::exists(cached));
  // The next run here finds the cache and measures nothing.
  lines.clear();
  o.candidates = {dir / "probe.json"};
  o.write_to = dir / "run2/probe.json";
  fs::create_directories(dir / "run2");
  const LocalProbe again = local_probe(o);
  EXPECT_EQ(again.source, cached);
  EXPECT_EQ(again.doc["created"], p.doc["created"]);
  for (const std::string& l : lines) EXPECT_EQ(l.find("measuring"), std::string::npos) << l;
  EXPECT_TRUE(fs::exists(dir / "run2/probe.json"));
  // Without measuring (crucible plan), nothing at all.
  ScopedEnv empty("CRUCIBLE_CACHE_DIR", dir / "empty-cache");
  o.measure = false;
  o.write_to.clear();
  EXPECT_TRUE(local_probe(o).doc.is_null());
}

// A training run in a directory holding another machine's probe.json: one
// line names it, plan.json's cluster is this machine, no MFU above 1.
TEST(LocalProbe, TrainingPassesOverAForeignProbeAndPredictsForThisMachine) {
  TempDir dir("train_foreign_probe");
  fs::copy_file(kData + "probe_foreign_machine.json", dir / "probe.json");
  testutil::SmallRun run = testutil::short_run();
  const std::string cfg = testutil::write_small_config(dir, run);
  auto r = e2e::run_crucible({"train", cfg, "--run-dir", dir / "run"}, dir.path());
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("probe.json not used: it was made on another machine (host xeon-amx-vm"),
            std::string::npos)
      << r.output;
  auto plan = read_json(dir / "run/plan.json");
  ASSERT_TRUE(plan.is_ok());
  ASSERT_TRUE(plan->contains("step_time_s")) << plan->dump();
  const std::string host = machine_identity()["hostname"];
  EXPECT_NE((*plan)["cluster"]["name"].get<std::string>().find(host), std::string::npos) << plan->dump();
  auto probe = read_json(dir / "run/probe.json");
  ASSERT_TRUE(probe.is_ok());
  EXPECT_EQ((*probe)["machine"]["fingerprint"], machine_identity()["fingerprint"]);
  for (const json& row : e2e::metric_rows(dir / "run/metrics.jsonl")) {
    ASSERT_TRUE(row.contains("mfu"));
    if (row["mfu"].is_null()) continue;  // "n/a": not told honestly here
    EXPECT_GT(row["mfu"].get<double>(), 0.0);
    EXPECT_LE(row["mfu"].get<double>(), 1.0);
  }
}

}  // namespace
}  // namespace crucible::profile
