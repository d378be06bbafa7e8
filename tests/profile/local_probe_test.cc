// Which probe document a run trusts (profile/machine.h, profile/local_probe.h):
// only one made on this machine and young enough; another machine's is
// named and passed over, and this machine is measured instead, once.
#include "profile/local_probe.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/file_io.h"
#include "core/json_io.h"
#include "core/threads.h"
#include "kernels/cuda/cuda.h"
#include "plan/cluster.h"
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
  ~ScopedEnv() {
    had ? (void)::setenv(name.c_str(), old.c_str(), 1) : (void)::unsetenv(name.c_str());
  }
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
  EXPECT_NE(lines[0].find("probe.json not used: it was made on another machine"), std::string::npos)
      << lines[0];
  EXPECT_EQ(p.source, "measured now");
  EXPECT_EQ(p.doc["machine"]["fingerprint"], machine_identity()["fingerprint"]);
  EXPECT_TRUE(p.doc["compute"]["valid"].get<bool>());
  EXPECT_GT(gemm_ceiling(p.doc, 1, "f32"), 0.0);
  // Kept in the run directory and the machine cache.
  ASSERT_TRUE(fs::exists(dir / "run/probe.json"));
  EXPECT_EQ(read_json(dir / "run/probe.json")->at("created"), p.doc["created"]);
  const std::string cached = machine_cache_file();
  EXPECT_EQ(cached, dir / "cache/probe-" + machine_identity()["fingerprint"].get<std::string>() + "-t" +
                        std::to_string(num_threads()) + ".json");
  ASSERT_TRUE(fs::exists(cached));
  // Measured quietly (a busy machine's cache is measured again where the
  // machine is quiet: the test below).
  json quiet = *read_json(cached);
  for (auto& [name, l] : quiet["load"].items()) l = {{"others_share", 0.0}, {"reliable", true}};
  ASSERT_TRUE(write_file_atomic(cached, quiet.dump()).is_ok());
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

// A cached probe measured while other processes held the CPUs (a build, a
// test suite beside it) is not this machine's speed: a run measures again
// where the machine is quiet now and replaces the cache, and where it is
// busy uses it saying it is unreliable. Which of the two happens depends on
// the machine's load during the run, so either is accepted, each in full.
TEST(LocalProbe, ACacheMeasuredUnderLoadIsMeasuredAgainOrNamedUnreliable) {
  TempDir dir("local_probe_load");
  ScopedEnv cache("CRUCIBLE_CACHE_DIR", dir / "cache");
  LocalProbeOptions o;
  std::vector<std::string> lines;
  o.log = [&](const std::string& m) { lines.push_back(m); };
  const LocalProbe first = local_probe(o);  // fills the cache
  ASSERT_FALSE(first.doc.is_null());
  const std::string cached = machine_cache_file();
  EXPECT_EQ(cached, dir / "cache/probe-" + machine_identity()["fingerprint"].get<std::string>() + "-t" +
                        std::to_string(num_threads()) + ".json");
  json busy = *read_json(cached);
  for (auto& [name, l] : busy["load"].items()) l = {{"others_share", 0.0}, {"reliable", true}};
  busy["load"]["compute"] = {{"others_share", 0.5}, {"reliable", false}};
  busy["created"] = "2026-01-01T00:00:00Z";  // the copy to tell apart from a new one
  o.max_age_days = 36500;
  ASSERT_TRUE(write_file_atomic(cached, busy.dump()).is_ok());
  lines.clear();
  const LocalProbe p = local_probe(o);
  std::string all;
  for (const std::string& l : lines) all += l + "\n";
  if (p.source == "measured now") {
    EXPECT_NE(all.find("not used: measured while other processes held the CPUs (compute 50%), and the machine is "
                       "quiet now"),
              std::string::npos)
        << all;
    EXPECT_NE(read_json(cached)->at("created"), "2026-01-01T00:00:00Z") << "the cache was not replaced";
  } else {
    EXPECT_EQ(p.source, cached);
    EXPECT_EQ(p.doc["created"], "2026-01-01T00:00:00Z");
    EXPECT_NE(all.find("measured while other processes held the CPUs (compute 50%): its figures (and the "
                       "prediction) are unreliable"),
              std::string::npos)
        << all;
  }
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
  EXPECT_NE((*plan)["cluster"]["name"].get<std::string>().find(host), std::string::npos)
      << plan->dump();
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

// A GPU run's document (profile/local_probe.h): one holding its GPU's section,
// its step's GEMM shape and its attention is used as it is (nothing
// measured: no GPU here), with the run's GPU listed first; one with its CPU
// sections only would need the GPU measured, which a machine without one
// cannot: the run then predicts nothing, and says why.
TEST(LocalProbe, AGpuRunUsesItsGpusSectionListedFirst) {
  TempDir dir("local_probe_gpu");
  ScopedEnv cache("CRUCIBLE_CACHE_DIR", dir / "cache");
  auto device = [](int index, double bf16) {
    return json{
        {"index", index},
        {"name", "GPU"},
        {"memory_bytes", 80e9},
        {"gemm_n", 8192},
        {"bf16_gemm_tflops", bf16},
        {"f32_gemm_tflops", 50.0},
        {"copy_gbs", 3000.0},
        {"gemm", {{{"m", 4096}, {"n", 768}, {"k", 768}, {"dtype", "bf16"}, {"tflops", bf16 / 2}}}},
        {"attention",
         {{{"B", 4}, {"T", 1024}, {"C", 768}, {"NH", 12}, {"dtype", "bf16"}, {"tflops", 200.0}}}}};
  };
  json doc = {{"schema", "crucible-probe/1"},
              {"machine", machine_identity()},
              {"created", "2026-12-07T00:00:00Z"},
              {"gpu", {{"count", 2}, {"devices", {device(0, 700.0), device(1, 760.0)}}}}};
  doc["created"] = fixture("probe_zen3_vm_2026-12-03.json").value("created", std::string());
  ASSERT_TRUE(write_file_atomic(dir / "probe.json", doc.dump()).is_ok());
  LocalProbeOptions o;
  o.candidates = {dir / "probe.json"};
  o.max_age_days = 36500;
  o.gpu = 1;
  o.dtype = "bf16";
  StepGemm g{};
  g.m = 4096, g.n = 768, g.k = 768;
  o.step.calls = {g};
  o.step.attention = {4, 1024, 768, 12};
  std::vector<std::string> lines;
  o.log = [&](const std::string& m) { lines.push_back(m); };
  const LocalProbe p = local_probe(o);
  for (const std::string& l : lines) EXPECT_EQ(l.find("measuring"), std::string::npos) << l;
  ASSERT_FALSE(p.doc.is_null());
  EXPECT_EQ(p.doc["gpu"]["devices"][0]["index"], 1);
  // The GPU node's cluster file is cuda:1's, its attention the run's row.
  auto c = plan::cluster_from_probe(p.doc, p.source, plan::NodeKind::kGpu);
  ASSERT_TRUE(c) << c.status().message();
  EXPECT_DOUBLE_EQ(c->device.peak_flops[1], 760e12);
  EXPECT_NEAR(c->device.attention_efficiency[1], 200.0 / 760, 1e-12);
  // The same document for a CPU run is no CPU node: it has no compute section.
  auto cpu = plan::cluster_from_probe(p.doc, p.source, plan::NodeKind::kCpu);
  ASSERT_FALSE(cpu);
  EXPECT_NE(cpu.status().message().find("has no compute section"), std::string::npos)
      << cpu.status().message();
  // A document of this machine's CPU alone: a GPU run must measure its GPU,
  // which this machine cannot; no prediction, one line saying why.
  json cpu_only = fixture("probe_zen3_vm_2026-12-03.json");
  cpu_only["machine"] = machine_identity();
  ASSERT_TRUE(write_file_atomic(dir / "cpu.json", cpu_only.dump()).is_ok());
  o.candidates = {dir / "cpu.json"};
  lines.clear();
  const LocalProbe none = local_probe(o);
  if (kernels::cuda::device_count() == 0) {
    EXPECT_TRUE(none.doc.is_null());
    ASSERT_FALSE(lines.empty());
    EXPECT_NE(lines.back().find("no prediction"), std::string::npos) << lines.back();
    // And a GPU node's cluster needs the gpu section.
    auto gpu = plan::cluster_from_probe(cpu_only, "cpu.json", plan::NodeKind::kGpu);
    ASSERT_FALSE(gpu);
    EXPECT_NE(gpu.status().message().find("has no gpu section"), std::string::npos)
        << gpu.status().message();
  }
}

}  // namespace
}  // namespace crucible::profile
