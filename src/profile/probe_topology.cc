#include "profile/probe_topology.h"

#include <fmt/format.h>
#include <hwloc.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <utility>

namespace crucible::profile {
namespace {

using json = nlohmann::json;

struct TopologyDeleter {
  void operator()(hwloc_topology* t) const { hwloc_topology_destroy(t); }
};
using TopologyPtr = std::unique_ptr<hwloc_topology, TopologyDeleter>;

std::string hex4(unsigned v) { return fmt::format("0x{:04x}", v); }

std::string busid(unsigned domain, unsigned bus, unsigned dev, unsigned func) {
  return fmt::format("{:04x}:{:02x}:{:02x}.{:x}", domain, bus, dev, func);
}

std::string class_name(unsigned class_id) {
  const unsigned base = class_id >> 8;
  switch (class_id) {
    case 0x0302:
      return "gpu/3d";
    case 0x0300:
      return "gpu/vga";
    case 0x0b40:
      return "coprocessor";
    case 0x0200:
      return "network/ethernet";
    case 0x0207:
    case 0x0c06:
      return "network/infiniband";
    case 0x0108:
      return "storage/nvme";
    case 0x0106:
      return "storage/sata";
    case 0x0104:
      return "storage/raid";
    default:
      break;
  }
  if (base == 0x03) return "gpu/other";
  if (base == 0x12) return "accelerator";
  if (base == 0x02) return "network";
  if (base == 0x01) return "storage";
  return "other";
}

bool starts_with(const char* s, const char* prefix) {
  return s && std::strncmp(s, prefix, std::strlen(prefix)) == 0;
}

// The rules documented in the header, in that order.
std::string classify(const hwloc_obj_attr_u::hwloc_pcidev_attr_s& pci,
                     const std::vector<hwloc_obj_t>& osdevs) {
  const unsigned c = pci.class_id, base = c >> 8;
  bool coproc = false, vendor_gpu = false, net = false, block = false;
  for (hwloc_obj_t o : osdevs) {
    switch (o->attr->osdev.type) {
      case HWLOC_OBJ_OSDEV_COPROC:
        coproc = true;
        break;
      case HWLOC_OBJ_OSDEV_GPU:
        vendor_gpu |= starts_with(o->name, "nvml") || starts_with(o->name, "rsmi");
        break;
      case HWLOC_OBJ_OSDEV_NETWORK:
      case HWLOC_OBJ_OSDEV_OPENFABRICS:
        net = true;
        break;
      case HWLOC_OBJ_OSDEV_BLOCK:
        block = true;
        break;
      default:
        break;
    }
  }
  const bool discrete_vga = c == 0x0300 && (pci.vendor_id == 0x10de || pci.vendor_id == 0x1002);
  if (base == 0x12 || c == 0x0302 || c == 0x0b40 || coproc || vendor_gpu || discrete_vga) {
    return "accelerator";
  }
  if (base == 0x02 || c == 0x0c06 || net) return "nic";
  if (base == 0x01 || block) return "storage";
  return "other";
}

// The one Package containing the object's locality, or -1.
int socket_of(hwloc_topology_t topo, hwloc_obj_t normal) {
  hwloc_obj_t pkg = nullptr;
  while ((pkg = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_PACKAGE, pkg)) != nullptr) {
    if (!hwloc_bitmap_iszero(normal->cpuset) &&
        hwloc_bitmap_isincluded(normal->cpuset, pkg->cpuset)) {
      return static_cast<int>(pkg->os_index);
    }
  }
  return -1;
}

// The NUMA node whose CPUs include the object's locality: the device is local
// to it. Several (DRAM and HBM of one package): the lowest os_index. None (a
// device attached to the whole machine on a multi-node box): -1.
int numa_node_of(hwloc_topology_t topo, hwloc_obj_t normal) {
  int best = -1;
  hwloc_obj_t node = nullptr;
  while ((node = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, node)) != nullptr) {
    if (hwloc_bitmap_iszero(node->cpuset) || hwloc_bitmap_iszero(normal->cpuset)) continue;
    if (!hwloc_bitmap_isincluded(normal->cpuset, node->cpuset)) continue;
    const int os = static_cast<int>(node->os_index);
    if (best < 0 || os < best) best = os;
  }
  return best;
}

json pci_device(hwloc_topology_t topo, hwloc_obj_t dev) {
  const hwloc_obj_attr_u::hwloc_pcidev_attr_s& p = dev->attr->pcidev;
  std::vector<hwloc_obj_t> osdevs;
  json names = json::array();
  bool openfabrics = false;
  for (hwloc_obj_t c = dev->io_first_child; c; c = c->next_sibling) {
    if (c->type != HWLOC_OBJ_OS_DEVICE) continue;
    osdevs.push_back(c);
    names.push_back(c->name ? c->name : "?");
    openfabrics |= c->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS;
  }
  const std::string kind = classify(p, osdevs);

  // The root port is the topmost PCI-to-PCI bridge on the way up; above it
  // sits the host bridge (upstream type "host"), above that a normal object.
  hwloc_obj_t port = nullptr, host = nullptr;
  for (hwloc_obj_t up = dev->parent; up && up->type == HWLOC_OBJ_BRIDGE; up = up->parent) {
    if (up->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_PCI) {
      port = up;
    } else {
      host = up;
      break;
    }
  }
  std::string root = "none";
  double root_link = 0;
  if (port) {
    const hwloc_obj_attr_u::hwloc_pcidev_attr_s& u = port->attr->bridge.upstream.pci;
    root = busid(u.domain, u.bus, u.dev, u.func);
    root_link = u.linkspeed;
  } else if (host && host->attr->bridge.downstream_type == HWLOC_OBJ_BRIDGE_PCI) {
    const auto& d = host->attr->bridge.downstream.pci;
    root = fmt::format("host bridge {:04x}:[{:02x}-{:02x}]", d.domain, d.secondary_bus,
                       d.subordinate_bus);
  }

  // The nearest PCIe switch above the device: its parent bridge is one of a
  // switch's downstream ports when that bridge's own parent is a PCI-to-PCI
  // bridge other than the root port (the switch's upstream port). Traffic
  // between two devices of one switch turns around inside it.
  std::string pcie_switch = "none";
  if (hwloc_obj_t dsp = dev->parent; dsp && dsp->type == HWLOC_OBJ_BRIDGE && dsp != port &&
                                     dsp->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_PCI) {
    hwloc_obj_t usp = dsp->parent;
    if (usp && usp->type == HWLOC_OBJ_BRIDGE && usp->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_PCI) {
      const auto& u = usp->attr->bridge.upstream.pci;
      pcie_switch = busid(u.domain, u.bus, u.dev, u.func);
    }
  }

  const char* vendor = hwloc_obj_get_info_by_name(dev, "PCIVendor");
  const char* name = hwloc_obj_get_info_by_name(dev, "PCIDevice");
  hwloc_obj_t normal = hwloc_get_non_io_ancestor_obj(topo, dev);
  return json{
      {"busid", busid(p.domain, p.bus, p.dev, p.func)},
      {"class_id", hex4(p.class_id)},
      {"class", class_name(p.class_id)},
      {"vendor", vendor ? vendor : hex4(p.vendor_id)},
      {"name", name ? name : hex4(p.device_id)},
      {"os_devices", names},
      {"kind", kind},
      {"rdma", kind == "nic" && (openfabrics || p.class_id == 0x0207 || p.class_id == 0x0c06)},
      {"link_gbs", static_cast<double>(p.linkspeed)},
      {"root", root},
      {"root_is_port", port != nullptr},
      {"root_link_gbs", root_link},
      {"switch", pcie_switch},
      {"numa_node", normal ? numa_node_of(topo, normal) : -1},
      {"socket", normal ? socket_of(topo, normal) : -1}};
}

json caches(hwloc_topology_t topo) {
  static constexpr std::pair<hwloc_obj_type_t, int> kLevels[] = {{HWLOC_OBJ_L1CACHE, 1},
                                                                 {HWLOC_OBJ_L2CACHE, 2},
                                                                 {HWLOC_OBJ_L3CACHE, 3},
                                                                 {HWLOC_OBJ_L4CACHE, 4},
                                                                 {HWLOC_OBJ_L5CACHE, 5}};
  std::map<std::pair<int, uint64_t>, int> count;  // (level, size) -> instances
  for (const auto& [type, level] : kLevels) {
    hwloc_obj_t c = nullptr;
    while ((c = hwloc_get_next_obj_by_type(topo, type, c)) != nullptr) {
      if (c->attr->cache.type == HWLOC_OBJ_CACHE_INSTRUCTION) continue;
      ++count[{level, c->attr->cache.size}];
    }
  }
  json out = json::array();
  for (const auto& [key, n] : count) {
    out.push_back({{"level", key.first}, {"size_bytes", key.second}, {"count", n}});
  }
  return out;
}

// ---- warnings (pure, on the json) ----

bool is_heavy(const json& d) {
  const std::string kind = d.value("kind", "");
  return kind == "accelerator" || kind == "nic" ||
         (kind == "storage" && d.value("class_id", "") == "0x0108");
}

std::string kind_word(const json& d) {
  const std::string kind = d.value("kind", "");
  if (kind == "nic") return "NIC";
  if (kind == "storage" && d.value("class_id", "") == "0x0108") return "NVMe";
  return kind;
}

// "NIC ib0/mlx5_0 (0000:04:00.0, MT28908 Family [ConnectX-6])"
std::string label(const json& d) {
  std::string os;
  for (const auto& n : d.value("os_devices", json::array())) {
    os += (os.empty() ? "" : "/") + n.get<std::string>();
  }
  const std::string bus = d.value("busid", "?"), name = d.value("name", "");
  std::string detail = os.empty() ? "" : bus;
  if (!name.empty()) detail += (detail.empty() ? "" : ", ") + name;
  return kind_word(d) + " " + (os.empty() ? bus : os) + (detail.empty() ? "" : " (" + detail + ")");
}

std::string join_labels(const std::vector<const json*>& ds) {
  std::string s;
  for (size_t i = 0; i < ds.size(); ++i) {
    s += (i == 0 ? "" : i + 1 == ds.size() ? " and " : ", ") + label(*ds[i]);
  }
  return s;
}

std::string where(const json& d) {
  const int sock = d.value("socket", -1), node = d.value("numa_node", -1);
  if (sock >= 0 && node >= 0) return fmt::format("socket {} (NUMA node {})", sock, node);
  if (sock >= 0) return fmt::format("socket {}", sock);
  return fmt::format("NUMA node {}", node);
}

enum class Locality { kSame, kOtherNumaNode, kOtherSocket, kUnknown };

// Where device b sits relative to device a; kUnknown when the json cannot
// tell (locality missing on either side).
Locality locality(const json& a, const json& b) {
  const int sa = a.value("socket", -1), sb = b.value("socket", -1);
  const int na = a.value("numa_node", -1), nb = b.value("numa_node", -1);
  if (sa >= 0 && sb >= 0 && sa != sb) return Locality::kOtherSocket;
  if (na >= 0 && nb >= 0) return na == nb ? Locality::kSame : Locality::kOtherNumaNode;
  if (sa >= 0 && sb >= 0) return Locality::kSame;
  return Locality::kUnknown;
}

std::string bytes_readable(double b) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) b /= 1024, ++u;
  return b == static_cast<double>(static_cast<int64_t>(b)) ? fmt::format("{:.0f} {}", b, kUnits[u])
                                                           : fmt::format("{:.1f} {}", b, kUnits[u]);
}

}  // namespace

Result<json> probe_topology(const std::string& xml_path) {
  if (!xml_path.empty()) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(xml_path, ec)) {
      return Status::not_found("[probe] topology XML " + xml_path + ": no such file");
    }
  }
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) {
    return Status::internal(std::string("[probe] topology: hwloc_topology_init: ") +
                            std::strerror(errno));
  }
  TopologyPtr topo(raw);
  hwloc_topology_set_io_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  if (!xml_path.empty() && hwloc_topology_set_xml(raw, xml_path.c_str()) != 0) {
    return Status::invalid("[probe] topology XML " + xml_path +
                           ": hwloc cannot use it: " + std::strerror(errno));
  }
  if (hwloc_topology_load(raw) != 0) {
    const std::string what =
        xml_path.empty() ? "topology of this machine" : "topology XML " + xml_path;
    return Status::invalid("[probe] " + what + ": hwloc cannot load it: " + std::strerror(errno));
  }

  json out;
  out["source"] = xml_path.empty() ? "this machine" : xml_path;
  out["sockets"] = hwloc_get_nbobjs_by_type(raw, HWLOC_OBJ_PACKAGE);
  out["cores"] = hwloc_get_nbobjs_by_type(raw, HWLOC_OBJ_CORE);
  out["pus"] = hwloc_get_nbobjs_by_type(raw, HWLOC_OBJ_PU);
  json nodes = json::array();
  hwloc_obj_t node = nullptr;
  while ((node = hwloc_get_next_obj_by_type(raw, HWLOC_OBJ_NUMANODE, node)) != nullptr) {
    const int cores =
        node->cpuset ? hwloc_get_nbobjs_inside_cpuset_by_type(raw, node->cpuset, HWLOC_OBJ_CORE)
                     : 0;
    nodes.push_back({{"os_index", node->os_index},
                     {"memory_bytes", node->attr->numanode.local_memory},
                     {"cores", std::max(cores, 0)}});
  }
  out["numa_nodes"] = std::move(nodes);
  out["caches"] = caches(raw);
  json pci = json::array();
  hwloc_obj_t dev = nullptr;
  while ((dev = hwloc_get_next_pcidev(raw, dev)) != nullptr) pci.push_back(pci_device(raw, dev));
  out["pci"] = std::move(pci);
  out["warnings"] = topology_warnings(out);
  const std::string error = check_topology(out);
  out["valid"] = error.empty();
  if (!error.empty()) out["error"] = error;
  return out;
}

std::vector<std::string> topology_warnings(const json& topo) {
  std::vector<std::string> warnings;
  const json pci = topo.value("pci", json::array());

  // Heavy devices grouped by the root port whose lanes they share.
  std::map<std::string, std::vector<const json*>> by_port;
  for (const auto& d : pci) {
    if (is_heavy(d) && d.value("root_is_port", false)) by_port[d.value("root", "")].push_back(&d);
  }
  for (const auto& [port, devs] : by_port) {
    // A PCIe link joins one port to one device, so the functions on one bus
    // (ports of a dual-port NIC, SR-IOV virtual functions) are one card.
    std::set<std::string> cards;
    for (const json* d : devs) cards.insert(d->value("busid", "").substr(0, 7));  // "0000:04"
    if (cards.size() < 2) continue;
    bool nic = false, accel = false;
    for (const json* d : devs) {
      nic |= d->value("kind", "") == "nic";
      accel |= d->value("kind", "") == "accelerator";
    }
    const double gbs = devs.front()->value("root_link_gbs", 0.0);
    const std::string port_desc =
        "PCIe root port " + port + (gbs > 0 ? fmt::format(" ({:.1f} GB/s)", gbs) : "");
    // Accelerator and NIC pairs under one PCIe switch (the DGX design):
    // GPUDirect RDMA between them turns around in the switch.
    std::map<std::string, std::vector<const json*>> by_switch;
    for (const json* d : devs)
      if (d->value("switch", "none") != "none") by_switch[d->value("switch", "")].push_back(d);
    std::string paired;
    for (const auto& [sw, under] : by_switch) {
      bool n = false, a = false;
      std::string names;
      for (const json* d : under) {
        n |= d->value("kind", "") == "nic", a |= d->value("kind", "") == "accelerator";
        const json os = d->value("os_devices", json::array());
        names += (names.empty() ? "" : "+") + (os.empty() ? d->value("busid", "?") : os[0].get<std::string>());
      }
      if (n && a) paired += (paired.empty() ? "" : ", ") + names + " under switch " + sw;
    }
    if (nic && accel) {
      warnings.push_back(join_labels(devs) + " sit behind the same " + port_desc +
                         ": they share its lanes, so the accelerator's host traffic (gradients, "
                         "activations) competes with the network, and each gets about half the "
                         "port's bandwidth when both stream (GPUDirect RDMA between them does "
                         "gain from the short path" +
                         (paired.empty() ? std::string(")") : ", which stays inside a PCIe switch for " + paired + ")") +
                         ".");
    } else {
      warnings.push_back(join_labels(devs) + " sit behind the same " + port_desc +
                         ": they share its lanes, so each gets about half the port's bandwidth "
                         "when both stream.");
    }
  }

  // Accelerators without a NIC on their socket (NUMA node when sockets do
  // not tell them apart).
  std::vector<const json*> nics, rdma_nics;
  for (const auto& d : pci) {
    if (d.value("kind", "") != "nic") continue;
    nics.push_back(&d);
    if (d.value("rdma", false)) rdma_nics.push_back(&d);
  }
  const std::vector<const json*>& fabric = rdma_nics.empty() ? nics : rdma_nics;
  for (const auto& a : pci) {
    if (a.value("kind", "") != "accelerator") continue;
    std::vector<const json*> remote;
    bool local_or_unknown = false, all_cross_socket = true;
    for (const json* n : fabric) {
      const Locality l = locality(a, *n);
      if (l == Locality::kSame || l == Locality::kUnknown) {
        local_or_unknown = true;
        break;
      }
      remote.push_back(n);
      all_cross_socket &= l == Locality::kOtherSocket;
    }
    if (local_or_unknown || remote.empty()) continue;
    std::string nic_where;
    for (const json* n : remote) {
      nic_where += (nic_where.empty() ? "" : "; ") + label(*n) + " on " + where(*n);
    }
    warnings.push_back(
        label(a) + " is on " + where(a) + " but no NIC is: " + nic_where +
        (all_cross_socket
             ? ". Its network traffic crosses the inter-socket link (UPI / Infinity Fabric), "
               "which adds latency and competes with remote memory traffic."
             : ". Its network traffic crosses between NUMA nodes, which adds latency and "
               "shares the on-chip fabric with remote memory traffic."));
  }
  return warnings;
}

std::string check_topology(const json& topo) {
  const int64_t cores = topo.value("cores", int64_t{0}), pus = topo.value("pus", int64_t{0}),
                sockets = topo.value("sockets", int64_t{0});
  if (cores < 1) return fmt::format("no cores (cores = {})", cores);
  if (pus < cores) return fmt::format("fewer PUs ({}) than cores ({})", pus, cores);
  if (sockets > cores) return fmt::format("more sockets ({}) than cores ({})", sockets, cores);
  const json nodes = topo.value("numa_nodes", json::array());
  if (nodes.empty()) return "no NUMA node";
  int64_t memory = 0, node_cores = 0;
  std::set<int64_t> node_ids;
  for (const auto& n : nodes) {
    const int64_t c = n.value("cores", int64_t{-1}), m = n.value("memory_bytes", int64_t{-1});
    const int64_t id = n.value("os_index", int64_t{-1});
    if (c < 0 || c > cores || m < 0) {
      return fmt::format("NUMA node {}: {} cores, {} bytes (machine: {} cores)", id, c, m, cores);
    }
    memory += m;
    node_cores += c;
    node_ids.insert(id);
  }
  if (memory <= 0) return "NUMA nodes hold no memory";
  if (node_cores < cores) {
    return fmt::format("NUMA nodes hold {} cores of the machine's {}", node_cores, cores);
  }
  for (const auto& c : topo.value("caches", json::array())) {
    const int level = c.value("level", 0);
    if (level < 1 || level > 5 || c.value("size_bytes", int64_t{0}) <= 0 ||
        c.value("count", 0) < 1) {
      return "bad cache entry " + c.dump();
    }
  }
  static const std::set<std::string> kKinds = {"accelerator", "nic", "storage", "other"};
  for (const auto& d : topo.value("pci", json::array())) {
    const int node = d.value("numa_node", -1);
    if (!kKinds.count(d.value("kind", "")) || (node != -1 && !node_ids.count(node))) {
      return "bad PCI entry " + d.dump();
    }
  }
  return "";
}

std::string topology_table(const json& t) {
  if (t.contains("error") && !t.contains("cores")) {
    return "  error: " + t["error"].get<std::string>() + "\n";
  }
  auto count = [](int64_t n, const char* what) {
    return fmt::format("{} {}{}", n, what, n == 1 ? "" : "s");
  };
  std::string out = fmt::format(
      "  {:<9} {}, {}, {}, {}\n", "machine", count(t.value("sockets", 0), "socket"),
      count(static_cast<int64_t>(t.value("numa_nodes", json::array()).size()), "NUMA node"),
      count(t.value("cores", 0), "core"), count(t.value("pus", 0), "hardware thread"));
  for (const auto& n : t.value("numa_nodes", json::array())) {
    out += fmt::format("  {:<9} node {}: {}, {} cores\n", "numa", n.value("os_index", -1),
                       bytes_readable(n.value("memory_bytes", 0.0)), n.value("cores", 0));
  }
  std::string cache_line;
  for (const auto& c : t.value("caches", json::array())) {
    const int level = c.value("level", 0);
    cache_line +=
        fmt::format("{}L{}{} {} x{}", cache_line.empty() ? "" : ", ", level, level == 1 ? "d" : "",
                    bytes_readable(c.value("size_bytes", 0.0)), c.value("count", 0));
  }
  out += fmt::format("  {:<9} {}\n", "caches", cache_line.empty() ? "none reported" : cache_line);
  for (const auto& d : t.value("pci", json::array())) {
    std::string os;
    for (const auto& n : d.value("os_devices", json::array())) {
      os += (os.empty() ? "" : ",") + n.get<std::string>();
    }
    const int node = d.value("numa_node", -1);
    // Without pci.ids, hwloc has only the numeric ids: show both.
    std::string name = d.value("name", "");
    if (name.rfind("0x", 0) == 0) name = d.value("vendor", "?") + " " + name;
    out += fmt::format("  {:<9} {}  {:<11} {:<14} numa {:<2} root {:<12} {}\n", "pci",
                       d.value("busid", "?"), d.value("kind", "?"), os.empty() ? "-" : os,
                       node < 0 ? "?" : std::to_string(node),
                       d.value("root_is_port", false) ? d.value("root", "?") : "complex", name);
  }
  if (!t.value("valid", true)) out += "  INVALID: " + t.value("error", std::string("?")) + "\n";
  for (const auto& w : t.value("warnings", json::array())) {
    out += "  warning: " + w.get<std::string>() + "\n";
  }
  return out;
}

}  // namespace crucible::profile
