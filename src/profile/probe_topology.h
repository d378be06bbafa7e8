// crucible probe, topology section: what hwloc says about this machine (or
// about a machine saved as hwloc XML): sockets, NUMA nodes, cores, caches, and
// the PCI devices that matter for training — accelerators, NICs, storage —
// with the PCIe root port each sits behind and its NUMA node. From that,
// warnings about placements that cost bandwidth: devices sharing a root
// port's lanes, an accelerator whose NIC is on another socket.
//
// JSON ("topology"):
//   source        "this machine" or the XML file's path
//   sockets       Package objects (0 where the OS does not say)
//   cores, pus    Core and PU (hardware thread) objects this process may use
//                 (hwloc leaves out CPUs the cgroup/affinity disallows)
//   numa_nodes    [{os_index, memory_bytes (local memory), cores (cores in
//                 the node's cpuset; 0 for a memory-only node)}]
//   caches        [{level (1..5), size_bytes, count}]: data and unified caches
//                 (L1d, L2, L3, ...; no instruction caches), one entry per
//                 (level, size), sorted by level then size
//   pci           [{busid ("0000:03:00.0"), class_id ("0x0302", PCI class and
//                 subclass), class (below), vendor, name (hwloc's PCIVendor /
//                 PCIDevice, else the "0x10de"/"0x20b0" ids), os_devices
//                 (["cuda0", "ib0", "mlx5_0", ...]), kind ("accelerator" |
//                 "nic" | "storage" | "other"), rdma (nic with an OpenFabrics
//                 device or an InfiniBand class), link_gbs (the device's PCIe
//                 link, GB/s; 0 unknown), root (busid of the root port, or
//                 "host bridge 0000:[00-04]" for a device on the root complex
//                 itself), root_is_port (whether root is a root port),
//                 root_link_gbs (the root port's link, GB/s; 0 unknown or not
//                 a port), switch (busid of the upstream port of the nearest
//                 PCIe switch above the device, "none" when it hangs off the
//                 root port itself), numa_node (os_index of the one NUMA node local to
//                 the device; -1 unknown), socket (Package os_index; -1
//                 unknown)}], in hwloc's order (by host bridge, then bus)
//   warnings      [sentences]: topology_warnings() of this object
//   valid         the counts are consistent (check_topology() below)
//   error         only when !valid: what is inconsistent
//
// Classification of a PCI device (first rule that matches):
//   accelerator  class 0x12xx (processing accelerator), 0x0302 (3D
//                controller: datacenter GPUs), 0x0b40 (co-processor), or a
//                COPROC OS device (CUDA, OpenCL, Level Zero), or a GPU OS
//                device from NVML/ROCm SMI (nvml*, rsmi*), or class 0x0300
//                (VGA) from NVIDIA (0x10de) or AMD (0x1002). Other VGA devices
//                — the BMC's ASPEED on most servers, which also has a DRM
//                "card0" GPU OS device — are "other".
//   nic          class 0x02xx (network) or 0x0c06 (InfiniBand), or a NETWORK
//                or OPENFABRICS OS device
//   storage      class 0x01xx (mass storage), or a BLOCK OS device
//   other        everything else hwloc keeps (its "important" filter: display,
//                network, storage, processors, accelerators, ...)
// class strings: "gpu/3d" (0x0302), "gpu/vga" (0x0300), "gpu/other" (0x03xx),
//   "accelerator" (0x12xx), "coprocessor" (0x0b40), "network/ethernet"
//   (0x0200), "network/infiniband" (0x0207, 0x0c06), "network" (0x02xx),
//   "storage/nvme" (0x0108), "storage/sata" (0x0106), "storage/raid" (0x0104),
//   "storage" (0x01xx), "other".
//
// Thread-safety: all functions may be called concurrently.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"

namespace crucible::profile {

// xml_path empty: this machine, with PCI devices (hwloc's "important" I/O
// filter); else the hwloc XML file at that path (lstopo --of xml), which is
// how tests feed synthetic machines. Errors: the file is missing or hwloc
// cannot load it (the message names the file).
Result<nlohmann::json> probe_topology(const std::string& xml_path = "");

// Placement warnings, from the json alone (pure). A device is "heavy" when it
// can stream for long: an accelerator, a NIC, or NVMe storage.
//  - Two or more heavy cards behind one root port share its lanes (functions
//    on one bus, e.g. a dual-port NIC's, are one card): each gets
//    about half the port's bandwidth when both stream. When a NIC and an
//    accelerator share it, the accelerator's host traffic (gradients,
//    activations) competes with the network; GPUDirect RDMA between them does
//    gain from the short path. Devices on the root complex itself
//    (root_is_port false: integrated or virtual devices) are not grouped.
//  - An accelerator with no NIC on its NUMA node (on its socket where NUMA
//    nodes are unknown) while NICs exist elsewhere: its network traffic
//    crosses the inter-socket link (UPI / Infinity Fabric) when every such NIC
//    is on another socket, else the fabric between NUMA nodes of one socket.
//    When any NIC is RDMA-capable only those count, since they carry training
//    traffic and the others are usually management ports. A NIC whose
//    locality the json cannot compare with the accelerator's silences it.
std::vector<std::string> topology_warnings(const nlohmann::json& topo);

// "" when the counts are consistent, else what is not: at least one core and
// pus >= cores >= sockets; at least one NUMA node, memory > 0 in total, every
// core local to some node and no node with more cores than the machine;
// caches with level 1..5, size > 0, count >= 1; each PCI device with a known
// kind and a numa_node that is -1 or a listed node. Pure.
std::string check_topology(const nlohmann::json& topo);

// A few aligned lines for the terminal (also for a {"error": ...} object).
std::string topology_table(const nlohmann::json& topo);

}  // namespace crucible::profile
