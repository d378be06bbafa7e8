// check_probe_document against the probe files crucible writes and their
// damaged variants (the cases of issue 32), and the readers behind it.
#include "profile/probe_schema.h"

#include <gtest/gtest.h>

#include <cmath>

#include "plan/cluster.h"
#include "support/files.h"

namespace crucible::profile {
namespace {

using nlohmann::json;

json seed(const std::string& name) {
  return json::parse(
      testutil::read_file(std::string(CRUCIBLE_SOURCE_DIR) + "/fuzz/corpus/probe/" + name));
}

std::string why(const Status& s) { return s.is_ok() ? "ok" : s.message(); }

TEST(ProbeSchema, AcceptsWhatTheProbeWrites) {
  EXPECT_EQ(why(check_probe_document(seed("machine.json"), "probe.json")), "ok");
  EXPECT_EQ(why(check_probe_document(seed("two_ranks.json"), "probe.json")), "ok");
  // A probe of some sections only.
  EXPECT_EQ(why(check_probe_document(json{{"schema", "crucible-probe/1"}}, "probe.json")), "ok");
}

TEST(ProbeSchema, NamesTheBadField) {
  const json good = seed("two_ranks.json");
  struct Case {
    const char* pointer;
    json value;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"/compute", 5, "[probe] p.json: compute must be an object, not an integer"},
      {"/compute/gemm/0", 7, "[probe] p.json: compute.gemm[0] must be an object, not an integer"},
      {"/compute/gemm/1/threads", "2",
       "[probe] p.json: compute.gemm[1].threads must be an integer, not a string"},
      {"/compute/gemm/0/gflops", 1e308,
       "[probe] p.json: compute.gemm[0].gflops = 1e+308 is out of range [0, 1e+08]"},
      {"/compute/gemm/0/gflops", -3,
       "[probe] p.json: compute.gemm[0].gflops = -3 is out of range [0, 1e+08]"},
      {"/compute/peak/derived_gflops_all", 1e308,
       "compute.peak.derived_gflops_all = 1e+308 is out of range"},
      {"/compute/peak/threads_all", "2",
       "compute.peak.threads_all must be an integer, not a string"},
      {"/memory/threads_all/triad/best_gbs", -1,
       "memory.threads_all.triad.best_gbs = -1 is out of range"},
      {"/topology/numa_nodes/0/memory_bytes", 1e300,
       "topology.numa_nodes[0].memory_bytes = 1e+300 is out of range"},
      {"/interconnect/collectives/allreduce/comm/1/busbw_gbs", "8",
       "interconnect.collectives.allreduce.comm[1].busbw_gbs must be a number, not a string"},
      {"/cpu/hardware_threads", 0, "cpu.hardware_threads = 0 is out of range [1, 16777216]"},
      {"/schema", "crucible-probe/2", "[probe] p.json is not a crucible probe document"},
      {"/gpu/peers/0/gbs", "300", "gpu.peers[0].gbs must be a number, not a string"},
      {"/gpu/peers/1/from", -1, "gpu.peers[1].from = -1 is out of range"},
      {"/gpu/devices/0/tf32_gemm_tflops", 1e300, "gpu.devices[0].tf32_gemm_tflops = 1e+300 is out of range"},
  };
  // A GPU node's section as a two-GPU machine writes it.
  json gpu_node = good;
  gpu_node["gpu"] = {{"count", 2},
                     {"devices", {{{"index", 0}, {"tf32_gemm_tflops", 380.0}}, {{"index", 1}}}},
                     {"peers",
                      {{{"from", 0}, {"to", 1}, {"access", true}, {"gbs", 370.0}},
                       {{"from", 1}, {"to", 0}, {"access", true}, {"gbs", 368.0}}}}};
  EXPECT_EQ(why(check_probe_document(gpu_node, "p.json")), "ok");
  for (const Case& c : cases) {
    json doc = std::string(c.pointer).rfind("/gpu", 0) == 0 ? gpu_node : good;
    doc[json::json_pointer(c.pointer)] = c.value;
    const std::string got = why(check_probe_document(doc, "p.json"));
    EXPECT_NE(got.find(c.message), std::string::npos) << c.pointer << ": " << got;
    EXPECT_EQ(got.find('\n'), std::string::npos);
  }
  // An infinity computed in memory (a file's 1e999 does not parse).
  json inf = good;
  inf["compute"]["peak"]["measured_fma_gflops_all"] = INFINITY;
  EXPECT_NE(why(check_probe_document(inf, "p.json"))
                .find("measured_fma_gflops_all = inf is out of range"),
            std::string::npos);
}

// A cluster is made only from a probe that passes, and only when it reads
// back: `plan --cluster-from-probe` never writes a file `--cluster` refuses.
TEST(ProbeSchema, ClusterFromProbeRefusesWhatItsReaderWould) {
  auto bad = plan::cluster_from_probe(seed("regression-gflops-1e308.json"), "probe.json");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("compute.gemm[0].gflops = 1e+308"), std::string::npos)
      << bad.status().message();
  auto good = plan::cluster_from_probe(seed("two_ranks.json"), "probe.json");
  ASSERT_TRUE(good.is_ok()) << good.status().message();
  EXPECT_TRUE(plan::check_cluster(*good).is_ok());
  // In range for the probe, beyond the cluster file's bounds: a latency of
  // 1e8 us per hop.
  json slow = seed("two_ranks.json");
  slow["interconnect"]["collectives"]["allreduce"]["comm"][0]["time_us"] = 2e8;
  auto refused = plan::cluster_from_probe(slow, "probe.json");
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.status().message().find("outside its bounds"), std::string::npos)
      << refused.status().message();
}

}  // namespace
}  // namespace crucible::profile
