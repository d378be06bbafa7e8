// Topology probe: hand-made hwloc XML machines (tests/profile/data/), this
// machine, and the pure warning and consistency rules on synthetic json.
//
// The XML machines share one shape: 2 sockets x 2 cores x 2 threads, one NUMA
// node of 64 GiB per socket, L1d 48 KiB and L2 1 MiB per core, L3 32 MiB per
// socket, an NVIDIA A100 (cuda0/nvml0) and a ConnectX-6 (ib0/mlx5_0):
//   two_socket_gpu_nic_shared_port     socket 0: root port 00:01.0 -> PCIe
//       switch -> GPU 03:00.0 and NIC 04:00.0; socket 1: NVMe behind 80:01.0
//   two_socket_gpu_nic_separate_ports  socket 0: GPU behind 00:01.0, NIC
//       behind 00:02.0; socket 1: NVMe behind 80:01.0
//   two_socket_gpu_nic_cross_socket    socket 0: GPU behind 00:01.0 and the
//       BMC's ASPEED VGA 05:00.0; socket 1: NIC 81:00.0 behind 80:01.0
#include "profile/probe_topology.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "support/files.h"

namespace crucible::profile {
namespace {

using json = nlohmann::json;

std::string data(const std::string& name) {
  return std::string(CRUCIBLE_SOURCE_DIR) + "/tests/profile/data/" + name;
}

json load(const std::string& name) {
  auto r = probe_topology(data(name));
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  return r.is_ok() ? *r : json::object();
}

const json& device(const json& topo, const std::string& busid) {
  for (const auto& d : topo["pci"]) {
    if (d["busid"] == busid) return d;
  }
  static const json none = json::object();
  ADD_FAILURE() << "no PCI device " << busid << " in " << topo["pci"].dump();
  return none;
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(ProbeTopology, TwoSocketMachineCountsAndCaches) {
  const json t = load("two_socket_gpu_nic_shared_port.xml");
  EXPECT_EQ(t["sockets"], 2);
  EXPECT_EQ(t["cores"], 4);
  EXPECT_EQ(t["pus"], 8);
  ASSERT_EQ(t["numa_nodes"].size(), 2u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(t["numa_nodes"][i]["os_index"], i);
    EXPECT_EQ(t["numa_nodes"][i]["memory_bytes"], int64_t{64} << 30);
    EXPECT_EQ(t["numa_nodes"][i]["cores"], 2);
  }
  // Instruction caches are left out; one entry per (level, size).
  EXPECT_EQ(t["caches"], json::parse(R"([{"level":1,"size_bytes":49152,"count":4},
                                         {"level":2,"size_bytes":1048576,"count":4},
                                         {"level":3,"size_bytes":33554432,"count":2}])"));
  EXPECT_EQ(t["valid"], true) << t.value("error", "");
  EXPECT_EQ(t["source"], data("two_socket_gpu_nic_shared_port.xml"));
}

TEST(ProbeTopology, SharedRootPortWarnsNamingNicAndGpu) {
  const json t = load("two_socket_gpu_nic_shared_port.xml");
  ASSERT_EQ(t["pci"].size(), 3u);
  const json& gpu = device(t, "0000:03:00.0");
  EXPECT_EQ(gpu["kind"], "accelerator");
  EXPECT_EQ(gpu["class"], "gpu/3d");
  EXPECT_EQ(gpu["class_id"], "0x0302");
  EXPECT_EQ(gpu["vendor"], "NVIDIA Corporation");
  EXPECT_EQ(gpu["os_devices"], json::parse(R"(["cuda0","nvml0"])"));
  // The root port is the topmost bridge, not the switch port right above.
  EXPECT_EQ(gpu["root"], "0000:00:01.0");
  EXPECT_EQ(gpu["root_is_port"], true);
  EXPECT_EQ(gpu["numa_node"], 0);
  EXPECT_EQ(gpu["socket"], 0);
  EXPECT_NEAR(gpu["link_gbs"].get<double>(), 31.5, 0.1);
  EXPECT_NEAR(gpu["root_link_gbs"].get<double>(), 15.75, 0.1);
  const json& nic = device(t, "0000:04:00.0");
  EXPECT_EQ(nic["kind"], "nic");
  EXPECT_EQ(nic["rdma"], true);
  EXPECT_EQ(nic["root"], "0000:00:01.0");
  const json& nvme = device(t, "0000:81:00.0");
  EXPECT_EQ(nvme["kind"], "storage");
  EXPECT_EQ(nvme["class"], "storage/nvme");
  EXPECT_EQ(nvme["root"], "0000:80:01.0");
  EXPECT_EQ(nvme["numa_node"], 1);
  EXPECT_EQ(nvme["socket"], 1);

  ASSERT_EQ(t["warnings"].size(), 1u) << t["warnings"].dump(2);
  const std::string w = t["warnings"][0];
  EXPECT_TRUE(contains(w, "cuda0")) << w;
  EXPECT_TRUE(contains(w, "0000:03:00.0")) << w;
  EXPECT_TRUE(contains(w, "ib0")) << w;
  EXPECT_TRUE(contains(w, "0000:04:00.0")) << w;
  EXPECT_TRUE(contains(w, "same PCIe root port 0000:00:01.0")) << w;
  EXPECT_TRUE(contains(w, "competes with the network")) << w;
  EXPECT_EQ(topology_warnings(t), t["warnings"].get<std::vector<std::string>>());
}

TEST(ProbeTopology, SeparateRootPortsOnOneSocketDoNotWarn) {
  const json t = load("two_socket_gpu_nic_separate_ports.xml");
  EXPECT_EQ(device(t, "0000:01:00.0")["root"], "0000:00:01.0");
  EXPECT_EQ(device(t, "0000:02:00.0")["root"], "0000:00:02.0");
  EXPECT_EQ(device(t, "0000:01:00.0")["socket"], device(t, "0000:02:00.0")["socket"]);
  EXPECT_TRUE(t["warnings"].empty()) << t["warnings"].dump(2);
  EXPECT_EQ(t["valid"], true);
}

TEST(ProbeTopology, GpuAndNicOnDifferentSocketsWarns) {
  const json t = load("two_socket_gpu_nic_cross_socket.xml");
  EXPECT_EQ(device(t, "0000:01:00.0")["socket"], 0);
  EXPECT_EQ(device(t, "0000:81:00.0")["socket"], 1);
  // The BMC's VGA is a display device with a DRM GPU OS device, not an accelerator.
  const json& bmc = device(t, "0000:05:00.0");
  EXPECT_EQ(bmc["class"], "gpu/vga");
  EXPECT_EQ(bmc["kind"], "other");
  EXPECT_EQ(bmc["root"], "0000:00:1c.0");

  ASSERT_EQ(t["warnings"].size(), 1u) << t["warnings"].dump(2);
  const std::string w = t["warnings"][0];
  EXPECT_TRUE(contains(w, "accelerator cuda0/nvml0 (0000:01:00.0")) << w;
  EXPECT_TRUE(contains(w, "on socket 0 (NUMA node 0)")) << w;
  EXPECT_TRUE(contains(w, "NIC ib0/mlx5_0 (0000:81:00.0")) << w;
  EXPECT_TRUE(contains(w, "on socket 1 (NUMA node 1)")) << w;
  EXPECT_TRUE(contains(w, "inter-socket link")) << w;
  EXPECT_FALSE(contains(w, "card0")) << w;
}

TEST(ProbeTopology, ThisMachineLoadsWithoutInventedDevices) {
  auto r = probe_topology();
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  const json& t = *r;
  EXPECT_EQ(t["source"], "this machine");
  EXPECT_GE(t["cores"].get<int>(), 1);
  EXPECT_GE(t["pus"].get<int>(), t["cores"].get<int>());
  EXPECT_FALSE(t["caches"].empty());
  EXPECT_FALSE(t["numa_nodes"].empty());
  EXPECT_EQ(t["valid"], true) << t.value("error", "");
  bool any_accelerator = false;
  for (const auto& d : t["pci"]) any_accelerator |= d["kind"] == "accelerator";
  for (const auto& w : t["warnings"]) {
    const std::string s = w;
    if (!any_accelerator) {
      EXPECT_FALSE(contains(s, "accelerator")) << s;
    }
    bool names_a_device = false;
    for (const auto& d : t["pci"]) names_a_device |= contains(s, d["busid"].get<std::string>());
    EXPECT_TRUE(names_a_device) << s;
  }
}

TEST(ProbeTopology, MissingOrBrokenXmlIsAnErrorNamingTheFile) {
  const std::string missing = data("no_such_machine.xml");
  auto r = probe_topology(missing);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), Code::kNotFound);
  EXPECT_TRUE(contains(r.status().message(), missing)) << r.status().message();

  testutil::TempDir dir(testutil::current_test_name());
  const std::string broken = dir / "broken.xml";
  testutil::write_file(broken, "<?xml version=\"1.0\"?>\n<topology version=\"2.0\">\n<object");
  auto b = probe_topology(broken);
  ASSERT_FALSE(b.is_ok());
  EXPECT_TRUE(contains(b.status().message(), broken)) << b.status().message();
}

// ---- pure rules on synthetic json ----

json dev(const std::string& busid, const std::string& kind, const std::string& root, int socket,
         int numa, const std::string& class_id = "0x0000", bool rdma = false) {
  return json{{"busid", busid},
              {"kind", kind},
              {"class_id", class_id},
              {"name", "dev"},
              {"os_devices", json::array()},
              {"root", root},
              {"root_is_port", root.rfind("host", 0) != 0},
              {"root_link_gbs", 31.5},
              {"socket", socket},
              {"numa_node", numa},
              {"rdma", rdma}};
}

json machine(json pci) {
  return json{{"sockets", 2},
              {"cores", 4},
              {"pus", 8},
              {"numa_nodes", json::parse(R"([{"os_index":0,"memory_bytes":1024,"cores":2},
                                             {"os_index":1,"memory_bytes":1024,"cores":2}])")},
              {"caches", json::parse(R"([{"level":1,"size_bytes":32768,"count":4}])")},
              {"pci", std::move(pci)}};
}

TEST(ProbeTopologyWarnings, HeavyDevicesSharingARootPort) {
  // Two accelerators on one port: lane sharing, without the network wording.
  auto w = topology_warnings(machine({dev("0000:03:00.0", "accelerator", "0000:00:01.0", 0, 0),
                                      dev("0000:04:00.0", "accelerator", "0000:00:01.0", 0, 0)}));
  ASSERT_EQ(w.size(), 1u);
  EXPECT_TRUE(contains(w[0], "0000:03:00.0") && contains(w[0], "0000:04:00.0")) << w[0];
  EXPECT_TRUE(contains(w[0], "about half")) << w[0];
  EXPECT_FALSE(contains(w[0], "network")) << w[0];

  // An accelerator and NVMe: heavy. An accelerator and a SATA controller: not.
  w = topology_warnings(machine({dev("0000:03:00.0", "accelerator", "0000:00:01.0", 0, 0),
                                 dev("0000:04:00.0", "storage", "0000:00:01.0", 0, 0, "0x0108")}));
  ASSERT_EQ(w.size(), 1u);
  EXPECT_TRUE(contains(w[0], "NVMe 0000:04:00.0")) << w[0];
  w = topology_warnings(machine({dev("0000:03:00.0", "accelerator", "0000:00:01.0", 0, 0),
                                 dev("0000:04:00.0", "storage", "0000:00:01.0", 0, 0, "0x0106")}));
  EXPECT_TRUE(w.empty()) << w[0];

  // The two ports of one dual-port NIC are one card on one link: no warning,
  // until a second card joins them.
  w = topology_warnings(machine({dev("0000:04:00.0", "nic", "0000:00:01.0", 0, 0),
                                 dev("0000:04:00.1", "nic", "0000:00:01.0", 0, 0)}));
  EXPECT_TRUE(w.empty()) << w[0];
  w = topology_warnings(machine({dev("0000:03:00.0", "accelerator", "0000:00:01.0", 0, 0),
                                 dev("0000:04:00.0", "nic", "0000:00:01.0", 0, 0),
                                 dev("0000:04:00.1", "nic", "0000:00:01.0", 0, 0)}));
  ASSERT_EQ(w.size(), 1u);
  EXPECT_TRUE(contains(w[0], "0000:04:00.1") && contains(w[0], "network")) << w[0];

  // Devices on the root complex itself are not behind a shared port.
  w = topology_warnings(
      machine({dev("0000:00:02.0", "storage", "host bridge 0000:[00-00]", 0, 0, "0x0108"),
               dev("0000:00:03.0", "nic", "host bridge 0000:[00-00]", 0, 0)}));
  EXPECT_TRUE(w.empty()) << w[0];
}

TEST(ProbeTopologyWarnings, NicLocality) {
  // A management NIC next to the GPU does not hide that the RDMA NIC is remote.
  auto w = topology_warnings(
      machine({dev("0000:01:00.0", "accelerator", "0000:00:01.0", 0, 0),
               dev("0000:02:00.0", "nic", "0000:00:02.0", 0, 0, "0x0200", false),
               dev("0000:81:00.0", "nic", "0000:80:01.0", 1, 1, "0x0207", true)}));
  ASSERT_EQ(w.size(), 1u);
  EXPECT_TRUE(contains(w[0], "0000:81:00.0") && !contains(w[0], "0000:02:00.0")) << w[0];
  EXPECT_TRUE(contains(w[0], "inter-socket")) << w[0];

  // Only non-RDMA NICs: the local one counts, no warning.
  w = topology_warnings(machine({dev("0000:01:00.0", "accelerator", "0000:00:01.0", 0, 0),
                                 dev("0000:02:00.0", "nic", "0000:00:02.0", 0, 0),
                                 dev("0000:81:00.0", "nic", "0000:80:01.0", 1, 1)}));
  EXPECT_TRUE(w.empty()) << w[0];

  // One socket, two NUMA nodes (sub-NUMA clustering): the milder wording.
  w = topology_warnings(machine({dev("0000:01:00.0", "accelerator", "0000:00:01.0", 0, 0),
                                 dev("0000:41:00.0", "nic", "0000:40:01.0", 0, 1)}));
  ASSERT_EQ(w.size(), 1u);
  EXPECT_TRUE(contains(w[0], "between NUMA nodes")) << w[0];

  // Unknown locality of the NIC: nothing to say.
  w = topology_warnings(machine({dev("0000:01:00.0", "accelerator", "0000:00:01.0", 0, 0),
                                 dev("0000:81:00.0", "nic", "0000:80:01.0", -1, -1)}));
  EXPECT_TRUE(w.empty()) << w[0];

  // No NIC at all: nothing to say either.
  EXPECT_TRUE(topology_warnings(machine({dev("0000:01:00.0", "accelerator", "0000:00:01.0", 0, 0)}))
                  .empty());
}

TEST(ProbeTopologyCheck, CatchesInconsistentCounts) {
  const json good = load("two_socket_gpu_nic_shared_port.xml");
  ASSERT_EQ(check_topology(good), "");
  auto broken = [&](auto&& damage) {
    json t = good;
    damage(t);
    return check_topology(t);
  };
  EXPECT_NE(broken([](json& t) { t["cores"] = 0; }), "");
  EXPECT_NE(broken([](json& t) { t["pus"] = 3; }), "");
  EXPECT_NE(broken([](json& t) { t["numa_nodes"] = json::array(); }), "");
  EXPECT_NE(broken([](json& t) { t["numa_nodes"][1]["cores"] = 0; }), "");  // 2 cores nowhere
  EXPECT_NE(broken([](json& t) { t["numa_nodes"][0]["cores"] = 9; }), "");
  EXPECT_NE(broken([](json& t) {
              for (auto& n : t["numa_nodes"]) n["memory_bytes"] = 0;
            }),
            "");
  EXPECT_NE(broken([](json& t) { t["caches"][2]["count"] = 0; }), "");
  EXPECT_NE(broken([](json& t) { t["caches"][0]["level"] = 7; }), "");
  EXPECT_NE(broken([](json& t) { t["pci"][0]["numa_node"] = 5; }), "");
  EXPECT_NE(broken([](json& t) { t["pci"][0]["kind"] = "gpu"; }), "");
}

TEST(ProbeTopologyTable, ShowsDevicesWarningsAndErrors) {
  const json t = load("two_socket_gpu_nic_shared_port.xml");
  const std::string table = topology_table(t);
  EXPECT_TRUE(contains(table, "2 sockets, 2 NUMA nodes, 4 cores, 8 hardware threads")) << table;
  EXPECT_TRUE(contains(table, "node 1: 64 GiB, 2 cores")) << table;
  EXPECT_TRUE(contains(table, "L1d 48 KiB x4, L2 1 MiB x4, L3 32 MiB x2")) << table;
  EXPECT_TRUE(contains(table, "0000:03:00.0  accelerator")) << table;
  EXPECT_TRUE(contains(table, "warning: ")) << table;
  EXPECT_EQ(topology_table(json{{"error", "[probe] boom"}}), "  error: [probe] boom\n");
}

}  // namespace
}  // namespace crucible::profile

namespace crucible::profile {
namespace {

// An 8-GPU DGX A100-like node (data/dgx_a100_8gpu.xml): per root port a
// two-level PCIe switch tree whose level-2 switches each hold one A100 and
// one ConnectX-6. Each GPU is paired with its NIC under one switch (the
// GPUDirect RDMA design); each root port's four cards share its lanes.
TEST(ProbeTopology, DgxNodePairsEachGpuWithItsNicUnderOneSwitch) {
  auto r = probe_topology(std::string(CRUCIBLE_SOURCE_DIR) + "/tests/profile/data/dgx_a100_8gpu.xml");
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  const nlohmann::json& t = *r;
  EXPECT_EQ(t["valid"], true) << t.dump();
  int gpus = 0, nics = 0;
  std::map<std::string, std::vector<std::string>> by_switch;
  for (const auto& d : t["pci"]) {
    const std::string kind = d["kind"];
    gpus += kind == "accelerator", nics += kind == "nic";
    if (kind == "accelerator" || kind == "nic") {
      ASSERT_NE(d["switch"], "none") << d.dump();
      by_switch[d["switch"]].push_back(kind);
    }
    if (kind == "storage") {
      EXPECT_NE(d["switch"], "none") << "the NVMe drive hangs off the level-1 switch";
    }
  }
  EXPECT_EQ(gpus, 8);
  EXPECT_EQ(nics, 8);
  ASSERT_EQ(by_switch.size(), 8u) << "eight level-2 switches";
  for (const auto& [sw, kinds] : by_switch) {
    std::vector<std::string> sorted = kinds;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, (std::vector<std::string>{"accelerator", "nic"})) << sw;
  }
  // One warning per root port (four), each naming its two GPU+NIC pairs and
  // their switches; no GPU lacks a NIC on its socket.
  const auto& w = t["warnings"];
  ASSERT_EQ(w.size(), 4u) << w.dump();
  int pairs = 0;
  for (const auto& s : w) {
    const std::string text = s;
    EXPECT_NE(text.find("sit behind the same PCIe root port"), std::string::npos) << text;
    for (size_t at = text.find(" under switch "); at != std::string::npos; at = text.find(" under switch ", at + 1))
      ++pairs;
    EXPECT_EQ(text.find("no NIC is"), std::string::npos) << text;
  }
  EXPECT_EQ(pairs, 8);
  EXPECT_NE(w[0].get<std::string>().find("cuda0+ib0 under switch 0000:03:00.0"), std::string::npos) << w[0];
}

TEST(ProbeTopology, ADeviceOnTheRootPortItselfHasNoSwitch) {
  auto r = probe_topology(std::string(CRUCIBLE_SOURCE_DIR) + "/tests/profile/data/two_socket_gpu_nic_shared_port.xml");
  ASSERT_TRUE(r.is_ok());
  for (const auto& d : (*r)["pci"]) {
    if (d["busid"] == "0000:81:00.0") {
      EXPECT_EQ(d["switch"], "none");  // NVMe straight under its root port
    }
    if (d["busid"] == "0000:03:00.0") {
      EXPECT_EQ(d["switch"], "0000:01:00.0");  // the A100 behind a PLX switch
    }
  }
}

}  // namespace
}  // namespace crucible::profile
