// The probe across hosts (`crucible launch --hostfile F -n N -- probe`):
// which rank measures each host's local sections, how their results reach
// rank 0, and the interconnect's pairs split into links inside a host and
// links between hosts.
//
// The first rank of each host (by host name, in rank order) runs the local
// sections (compute, memory, throttle, topology, storage) for its host while
// the others wait; rank 0 collects them into probe.json's "hosts" array:
//   hosts   one object per host, in the order of their first ranks:
//     host      its name
//     ranks     its ranks, ascending
//     compute, memory, throttle, topology, storage, durations_s
//               as the top-level sections (which stay rank 0's host's)
// and the interconnect section gets "links":
//   links   {"intra_host" | "inter_host": {   (absent when no such pair)
//     pairs            how many ping-pong pairs of that kind
//     latency_us       median of their latencies
//     bandwidth_gbs    median of their bandwidths
//     bandwidth_gbs_min  the slowest pair's
//   }}
// Hosts probed together share nothing on a real cluster; namespace hosts of
// one machine (tests/cluster) share its cores, so their compute figures are
// each about half the machine's.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "comm/comm.h"
#include "core/status.h"

namespace crucible::profile {

struct HostMap {
  std::vector<std::string> host_of;  // per rank
  std::vector<int> leaders;          // the first rank of each host, ascending
  bool leads(int rank) const;
};

// Collective: every rank's host name, and each host's first rank.
Result<HostMap> map_hosts(comm::Comm& comm);

// Collective: the leaders' `local` objects, gathered at rank 0 into the
// "hosts" array above (each with its host and ranks); other ranks get an
// empty array. `local` is ignored on ranks that do not lead.
Result<nlohmann::json> gather_host_sections(comm::Comm& comm, const HostMap& map, const nlohmann::json& local);

// The "links" object above, from an interconnect section's pingpong pairs
// and hosts.
nlohmann::json link_classes(const nlohmann::json& interconnect);
// Its lines for the terminal ("" when it is empty).
std::string links_table(const nlohmann::json& links);

}  // namespace crucible::profile
