#include "profile/probe_hosts.h"

#include <algorithm>
#include <cstdio>

#include "core/stats.h"

namespace crucible::profile {

using nlohmann::json;

namespace {
constexpr int kTagSize = 7101, kTagText = 7102;
}  // namespace

bool HostMap::leads(int rank) const { return std::find(leaders.begin(), leaders.end(), rank) != leaders.end(); }

Result<HostMap> map_hosts(comm::Comm& comm) {
  auto names = comm::host_names(comm);
  if (!names) return names.status();
  HostMap m;
  for (int r = 0; r < comm.size(); ++r) {
    m.host_of.push_back((*names)[size_t(r)]);
    if (std::find(m.host_of.begin(), m.host_of.end() - 1, m.host_of.back()) == m.host_of.end() - 1)
      m.leaders.push_back(r);
  }
  return m;
}

Result<json> gather_host_sections(comm::Comm& comm, const HostMap& map, const json& local) {
  json hosts = json::array();
  auto entry = [&](int leader, json sections) {
    json ranks = json::array();
    for (int r = 0; r < int(map.host_of.size()); ++r)
      if (map.host_of[size_t(r)] == map.host_of[size_t(leader)]) ranks.push_back(r);
    json e = {{"host", map.host_of[size_t(leader)]}, {"ranks", ranks}};
    e.update(sections);
    return e;
  };
  if (comm.rank() == 0) {
    for (int leader : map.leaders) {
      if (leader == 0) {
        hosts.push_back(entry(0, local));
        continue;
      }
      uint64_t n = 0;
      CRUCIBLE_RETURN_IF_ERROR(comm.recv(&n, sizeof n, leader, kTagSize));
      std::string text(n, '\0');
      CRUCIBLE_RETURN_IF_ERROR(comm.recv(text.data(), n, leader, kTagText));
      json sections = json::parse(text, nullptr, false);
      if (sections.is_discarded()) return Status::internal("[probe] host " + map.host_of[size_t(leader)] + "'s sections do not parse");
      hosts.push_back(entry(leader, sections));
    }
  } else if (map.leads(comm.rank())) {
    const std::string text = local.dump(-1, ' ', false, json::error_handler_t::replace);
    const uint64_t n = text.size();
    CRUCIBLE_RETURN_IF_ERROR(comm.send(&n, sizeof n, 0, kTagSize));
    CRUCIBLE_RETURN_IF_ERROR(comm.send(text.data(), n, 0, kTagText));
  }
  return hosts;
}

json link_classes(const json& interconnect) {
  json out = json::object();
  const json hosts = interconnect.value("hosts", json::array());
  const json pairs = interconnect.value("pingpong", json::array());
  for (const bool inter : {false, true}) {
    std::vector<double> lat, bw;
    for (const json& p : pairs) {
      const int a = p.value("a", -1), b = p.value("b", -1);
      const bool valid = p.contains("valid") && p["valid"].is_boolean() && p["valid"].get<bool>();
      if (a < 0 || b < 0 || size_t(std::max(a, b)) >= hosts.size() || !valid) continue;
      if ((hosts[size_t(a)] != hosts[size_t(b)]) != inter) continue;
      lat.push_back(p.value("latency_us", 0.0));
      bw.push_back(p.value("bandwidth_gbs", 0.0));
    }
    if (lat.empty()) continue;
    out[inter ? "inter_host" : "intra_host"] = {{"pairs", lat.size()},
                                                {"latency_us", median(lat)},
                                                {"bandwidth_gbs", median(bw)},
                                                {"bandwidth_gbs_min", *std::min_element(bw.begin(), bw.end())}};
  }
  return out;
}

std::string links_table(const json& links) {
  std::string out;
  for (const char* k : {"intra_host", "inter_host"}) {
    if (!links.contains(k)) continue;
    const json& l = links[k];
    char line[256];
    std::snprintf(line, sizeof line, "  %-11s %3d pair(s): latency %.1f us, bandwidth %.3g GB/s (slowest pair %.3g)\n",
                  k, l.value("pairs", 0), l.value("latency_us", 0.0), l.value("bandwidth_gbs", 0.0),
                  l.value("bandwidth_gbs_min", 0.0));
    out += line;
  }
  return out;
}

}  // namespace crucible::profile
