// `crucible probe` end to end: the quick probe's document (every section
// present and validated), the table, --compare, bad input, and the
// interconnect under `crucible launch -n 2`.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>

#include "support/cli_runner.h"

namespace crucible::e2e {
namespace {

using nlohmann::json;

TEST(ProbeCli, QuickProbeWritesAValidatedDocument) {
  TempDir dir("probe_quick");
  auto r = run_crucible({"probe", "--quick", "--throttle-s", "1", "--dir", dir.path(), "--json",
                         dir / "probe.json"});
  ASSERT_EQ(r.code, 0) << r.output;
  json p = json::parse(read_file(dir / "probe.json"));
  EXPECT_EQ(p["schema"], "crucible-probe/1");
  for (const char* s : {"compute", "memory", "throttle", "topology", "storage", "gpu", "interconnect"})
    EXPECT_TRUE(p.contains(s)) << s;
  // No GPU here: the section says so (tests/gpu/gpu_probe_test.cc measures one).
  if (p["gpu"]["count"] == 0) {
    EXPECT_TRUE(p["gpu"].contains("why")) << p["gpu"].dump();
    EXPECT_NE(r.output.find("GPUs\n  none: "), std::string::npos) << r.output;
  }
  // The packages' power under the sustained load, or why not (docs/energy.md).
  EXPECT_TRUE(p["throttle"].contains("power_w") || p["throttle"].contains("power_unmeasured")) << p["throttle"].dump();
  EXPECT_TRUE(p["compute"]["valid"].get<bool>());
  EXPECT_TRUE(p["memory"]["valid"].get<bool>()) << p["memory"].dump();
  EXPECT_TRUE(p["throttle"]["valid"].get<bool>());
  EXPECT_GE(p["topology"]["cores"].get<int>(), 1);
  ASSERT_EQ(p["storage"].size(), 1u);  // one --dir
  EXPECT_TRUE(p["storage"][0]["valid"].get<bool>()) << p["storage"].dump();
  EXPECT_EQ(p["interconnect"]["ranks"], 1);
  EXPECT_TRUE(p["interconnect"].contains("skipped"));
  // Every GEMM is reported against the peak for its thread count.
  for (const auto& g : p["compute"]["gemm"]) EXPECT_GT(g["fraction_of_peak"].get<double>(), 0.0);
  for (const char* t : {"Compute", "Memory", "Sustained load", "Topology", "Storage"})
    EXPECT_NE(r.output.find(t), std::string::npos) << t << "\n" << r.output;

  auto same = run_crucible({"probe", "--compare", dir / "probe.json", dir / "probe.json"});
  ASSERT_EQ(same.code, 0) << same.output;
  EXPECT_NE(same.output.find("STREAM triad, all threads"), std::string::npos) << same.output;
  // A probe compared with itself: every ratio is 1.00x.
  std::regex ratio(R"(([0-9]+\.[0-9]+)x)");
  int ratios = 0;
  for (auto it = std::sregex_iterator(same.output.begin(), same.output.end(), ratio);
       it != std::sregex_iterator(); ++it, ++ratios)
    EXPECT_EQ((*it)[1].str(), "1.00") << same.output;
  EXPECT_GT(ratios, 10) << same.output;
}

TEST(ProbeCli, BadInputIsOneLine) {
  TempDir dir("probe_bad");
  write_file(dir / "x.json", "{\"not\": \"a probe\"}");
  auto r = run_crucible({"probe", "--compare", dir / "x.json", dir / "x.json"});
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("is not a crucible probe document"), std::string::npos) << r.output;
  auto missing = run_crucible({"probe", "--compare", dir / "nope.json", dir / "x.json"});
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.output.find("cannot read"), std::string::npos) << missing.output;
  auto sections = run_crucible({"probe", "--sections", "gpus"});
  EXPECT_EQ(sections.code, 2);
  EXPECT_NE(sections.output.find("unknown section 'gpus'"), std::string::npos) << sections.output;
  // An empty list or item is named as one, not mistaken for the next option
  // ("unknown section '--json'"), and nothing is measured or written.
  for (const char* list : {",", "compute,,memory", "", "memory,"}) {
    auto empty = run_crucible({"probe", "--sections", list, "--json", dir / "p.json"});
    EXPECT_EQ(empty.code, 2) << list << ": " << empty.output;
    EXPECT_NE(
        empty.output.find("[probe] --sections '" + std::string(list) + "': an empty section name"),
        std::string::npos)
        << empty.output;
    EXPECT_EQ(empty.output.find("--json'"), std::string::npos) << empty.output;
    EXPECT_FALSE(std::filesystem::exists(dir / "p.json"));
  }
}

TEST(ProbeCli, InterconnectUnderLaunch) {
  TempDir dir("probe_launch");
  ::setenv("ASAN_OPTIONS", "detect_leaks=0", 1);  // see dist_train_test.cc
  auto r = run_crucible({"launch", "-n", "2", "--threads", "1", "--", "probe", "--quick",
                         "--sections", "interconnect", "--json", dir / "p.json"});
  ASSERT_EQ(r.code, 0) << r.output;
  json p = json::parse(read_file(dir / "p.json"));
  ASSERT_TRUE(p.contains("interconnect")) << p.dump();
  const auto& ic = p["interconnect"];
  EXPECT_EQ(ic["ranks"], 2);
  ASSERT_EQ(ic["pingpong"].size(), 1u);
  EXPECT_GT(ic["pingpong"][0]["latency_us"].get<double>(), 0.0);
  EXPECT_TRUE(ic["valid"].get<bool>());
  for (const char* c : {"allreduce", "allgather", "reduce_scatter"})
    for (const char* impl : {"comm", "mpi"}) EXPECT_FALSE(ic["collectives"][c][impl].empty()) << c << impl;
  EXPECT_FALSE(p.contains("compute"));
}

}  // namespace
}  // namespace crucible::e2e
