#include "profile/probe.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "comm/comm.h"
#include "core/clock.h"
#include "core/json_io.h"
#include "core/process.h"
#include "core/threads.h"
#include "profile/load_watch.h"
#include "profile/local_probe.h"
#include "profile/machine.h"
#include "profile/probe_compute.h"
#include "profile/probe_gpu.h"
#include "profile/probe_hosts.h"
#include "profile/probe_interconnect.h"
#include "profile/probe_memory.h"
#include "profile/probe_schema.h"
#include "profile/probe_storage.h"
#include "profile/probe_throttle.h"
#include "profile/probe_topology.h"

namespace crucible::profile {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      return colon == std::string::npos ? line : line.substr(colon + 2);
    }
  return "unknown";
}

std::string utc_now() { return wall_time("%Y-%m-%dT%H:%M:%SZ", true); }

// The directory itself if it exists, else its nearest existing parent.
std::string existing(const std::string& dir) {
  fs::path p = fs::absolute(dir);
  std::error_code ec;
  while (!p.empty() && !fs::is_directory(p, ec) && p != p.root_path()) p = p.parent_path();
  return p.string();
}

bool wanted(const ProbeOptions& o, const std::string& s) {
  return o.sections.empty() || std::find(o.sections.begin(), o.sections.end(), s) != o.sections.end();
}

}  // namespace

json probe_header(bool quick) {
  utsname u{};
  ::uname(&u);
  return {{"schema", kProbeSchema},
          {"created", utc_now()},
          {"host", host_name()},
          {"kernel", std::string(u.sysname) + " " + u.release},
          {"cpu", {{"model", cpu_model()}, {"hardware_threads", hardware_threads()}}},
          {"machine", machine_identity()},
          {"quick", quick}};
}

void probe_local_sections(const ProbeOptions& opt, json& doc) {
  if (!doc.contains("durations_s")) doc["durations_s"] = json::object();
  if (!doc.contains("load")) doc["load"] = json::object();
  auto log = [&](const std::string& m) {
    if (opt.log) opt.log(m);
  };
  auto timed = [&](const std::string& name, auto&& fn) {
    if (!wanted(opt, name)) return;
    log("[probe] " + name + " ...");
    Stopwatch sw;
    LoadWatch watch;
    doc[name] = fn();
    doc["durations_s"][name] = sw.elapsed_s();
    const json load = watch.to_json();
    doc["load"][name] = load;
    if (!load["reliable"].get<bool>())
      log("[probe] " + name + ": other processes used " + std::to_string(int(100 * load["others_share"].get<double>())) +
          "% of the CPUs meanwhile: its figures are unreliable");
  };
  timed("compute", [&] {
    ComputeOptions c;
    c.quick = opt.quick;
    c.budget_s = opt.compute_budget_s;
    return probe_compute(c);
  });
  timed("memory", [&] {
    MemoryOptions m;
    m.quick = opt.quick;
    m.budget_s = opt.memory_budget_s;
    return probe_memory(m);
  });
  timed("throttle", [&] {
    ThrottleOptions t;
    t.quick = opt.quick;
    t.seconds = opt.throttle_s;
    return probe_throttle(t);
  });
  timed("topology", [&]() -> json {
    auto t = probe_topology();
    return t ? *t : json{{"error", t.status().message()}};
  });
  timed("storage", [&] {
    std::vector<std::string> dirs = opt.storage_dirs;
    if (dirs.empty()) dirs = {"runs", "data"};
    json out = json::array();
    std::set<std::string> seen;
    for (const std::string& d : dirs) {
      const std::string dir = existing(d);
      if (!seen.insert(filesystem_id(dir)).second) continue;  // same file system
      StorageOptions s;
      s.dir = dir;
      s.quick = opt.quick;
      json r = probe_storage(s);
      r["for"] = d;
      out.push_back(r);
    }
    return out;
  });
  timed("gpu", [&] {
    GpuProbeOptions g;
    g.quick = opt.quick;
    return probe_gpu(g);
  });
}

Result<json> run_probe(const ProbeOptions& opt) {
  auto world = comm::world();
  if (!world) return world.status();
  comm::Comm& comm = **world;
  ProbeOptions local_opt = opt;  // progress from rank 0 only
  local_opt.log = [&](const std::string& m) {
    if (opt.log && comm.rank() == 0) opt.log(m);
  };
  const auto& log = local_opt.log;
  json doc = probe_header(opt.quick);
  doc["durations_s"] = json::object();
  // The interconnect first, with every rank; then the local sections on
  // the first rank of each host (profile/probe_hosts.h).
  HostMap hosts;
  if (comm.size() > 1) {
    auto m = map_hosts(comm);
    if (!m) return m.status();
    hosts = std::move(*m);
  }
  if (comm.size() > 1 && wanted(opt, "interconnect")) {
    log("[probe] interconnect ...");
    Stopwatch sw;
    auto ic = probe_interconnect(comm, {opt.quick, 0});
    if (!ic) return ic.status();
    doc["interconnect"] = *ic;
    doc["interconnect"]["links"] = link_classes(*ic);
    doc["durations_s"]["interconnect"] = sw.elapsed_s();
  }
  if (comm.size() > 1 && !hosts.leads(comm.rank())) {
    CRUCIBLE_RETURN_IF_ERROR(gather_host_sections(comm, hosts, json()).status());
    CRUCIBLE_RETURN_IF_ERROR(comm::quiet_barrier(comm));
    return doc;
  }
  if (hosts.leaders.size() > 1) log("[probe] local sections on the first rank of each of " + std::to_string(hosts.leaders.size()) + " hosts");
  probe_local_sections(local_opt, doc);
  if (comm.size() == 1 && wanted(opt, "interconnect"))
    doc["interconnect"] = {{"ranks", 1},
                           {"skipped", "one rank: run under crucible launch -n N -- probe"}};
  if (comm.size() > 1) {
    json local = {{"durations_s", doc["durations_s"]}, {"load", doc["load"]}};
    for (const char* k : {"compute", "memory", "throttle", "topology", "storage", "gpu"})
      if (doc.contains(k)) local[k] = doc[k];
    auto gathered = gather_host_sections(comm, hosts, local);
    if (!gathered) return gathered.status();
    if (comm.rank() == 0 && hosts.leaders.size() > 1) doc["hosts"] = *gathered;
    CRUCIBLE_RETURN_IF_ERROR(comm::quiet_barrier(comm));
  }
  return doc;
}

std::string probe_table(const json& p) {
  std::string out = "crucible probe: " + p.value("host", "?") + ", " +
                    p["cpu"].value("model", "?") + ", " + p.value("created", "") +
                    (p.value("quick", false) ? " (quick)" : "") + "\n";
  auto section = [&](const char* key, const char* title, auto&& table) {
    if (!p.contains(key)) return;
    out += std::string("\n") + title + "\n";
    out += table(p[key]);
    const json* l = p.contains("load") && p["load"].is_object() && p["load"].contains(key) ? &p["load"][key] : nullptr;
    if (l && l->is_object() && !l->value("reliable", true) && (*l)["others_share"].is_number())
      out += "  UNRELIABLE: other processes used " + std::to_string(int(100 * (*l)["others_share"].get<double>())) +
             "% of the CPUs while this section measured\n";
  };
  section("compute", "Compute", compute_table);
  section("memory", "Memory", memory_table);
  section("throttle", "Sustained load", throttle_table);
  section("topology", "Topology", topology_table);
  section("storage", "Storage", [](const json& arr) {
    std::string s;
    for (const auto& d : arr) s += storage_table(d);
    return s;
  });
  section("gpu", "GPUs", gpu_table);
  section("interconnect", "Interconnect", interconnect_table);
  if (const std::string links = p.contains("interconnect") ? links_table(p["interconnect"].value("links", json::object())) : "";
      !links.empty())
    out += "\nLinks\n" + links;
  // Every host's own sections, one after another (rank 0's host's are above).
  if (p.contains("hosts"))
    for (const json& h : p["hosts"]) {
      out += "\nHost " + h.value("host", "?") + " (ranks " + h.value("ranks", json::array()).dump() + ")\n";
      if (h.contains("compute")) out += compute_table(h["compute"]);
      if (h.contains("memory")) out += memory_table(h["memory"]);
    }
  return out;
}

namespace {

// One comparable figure: a label and where it sits in a probe document.
struct Figure {
  std::string label;
  double a = NAN, b = NAN;
  bool higher_is_better = true;
};

double num(const json& j, const json::json_pointer& ptr) {
  return j.contains(ptr) && j[ptr].is_number() ? j[ptr].get<double>() : NAN;
}

}  // namespace

Result<std::string> compare_probes(const json& a, const json& b, const std::string& la,
                                   const std::string& lb) {
  for (const json* d : {&a, &b})
    CRUCIBLE_RETURN_IF_ERROR(check_probe_document(*d, d == &a ? la : lb));
  std::vector<Figure> rows;
  auto add = [&](const std::string& label, const std::string& ptr, bool higher = true) {
    json::json_pointer p(ptr);
    rows.push_back({label, num(a, p), num(b, p), higher});
  };
  add("FMA peak, all threads (GFLOP/s)", "/compute/peak/derived_gflops_all");
  add("sustained clock (GHz)", "/compute/peak/clock_ghz");
  // GEMMs matched by (name, dtype, threads).
  if (a.contains("compute") && b.contains("compute") && a["compute"].contains("gemm") &&
      b["compute"].contains("gemm"))
    for (const auto& ga : a["compute"]["gemm"])
      for (const auto& gb : b["compute"]["gemm"])
        if (ga.contains("name") && gb.contains("name") && ga["name"] == gb["name"] &&
            ga["dtype"] == gb["dtype"] && ga["threads"] == gb["threads"])
          rows.push_back({"GEMM " + ga["name"].get<std::string>() + " " +
                              ga["dtype"].get<std::string>() + " x" +
                              std::to_string(ga["threads"].get<int>()) + " (GFLOP/s)",
                          ga["gflops"].get<double>(), gb["gflops"].get<double>(), true});
  for (const char* k : {"copy", "triad"}) {
    add(std::string("STREAM ") + k + ", 1 thread (GB/s)",
        std::string("/memory/threads_1/") + k + "/best_gbs");
    add(std::string("STREAM ") + k + ", all threads (GB/s)",
        std::string("/memory/threads_all/") + k + "/best_gbs");
  }
  add("sustained-load drop (fraction)", "/throttle/drop", false);
  add("storage[0] write+fsync (GB/s)", "/storage/0/seq_write_gbs");
  add("storage[0] cold read (GB/s)", "/storage/0/seq_read_gbs");
  add("storage[0] 4 KiB read p50 (us)", "/storage/0/rand_read_4k_us/p50", false);
  add("gpu 0 GEMM bf16 (TFLOP/s)", "/gpu/devices/0/bf16_gemm_tflops");
  add("gpu 0 copy (GB/s)", "/gpu/devices/0/copy_gbs");
  add("gpu 0 host->device pinned (GB/s)", "/gpu/devices/0/h2d_pinned_gbs");
  add("gpu 0 launch (us)", "/gpu/devices/0/launch_us", false);
  add("gpu 0 sustained bf16 (TFLOP/s)", "/gpu/devices/0/load/bf16_tflops");
  add("ping-pong latency 0-1 (us)", "/interconnect/pingpong/0/latency_us", false);
  add("ping-pong bandwidth 0-1 (GB/s)", "/interconnect/pingpong/0/bandwidth_gbs");
  for (const char* k : {"intra_host", "inter_host"}) {
    add(std::string("link ") + k + " latency, median (us)", std::string("/interconnect/links/") + k + "/latency_us", false);
    add(std::string("link ") + k + " bandwidth, median (GB/s)", std::string("/interconnect/links/") + k + "/bandwidth_gbs");
  }
  // Several hosts: each host's own figures, matched by position.
  const size_t nh = std::max(a.value("hosts", json::array()).size(), b.value("hosts", json::array()).size());
  for (size_t h = 0; h < nh; ++h) {
    const std::string at = "/hosts/" + std::to_string(h);
    add("host " + std::to_string(h) + " FMA peak, all threads (GFLOP/s)", at + "/compute/peak/derived_gflops_all");
    add("host " + std::to_string(h) + " STREAM triad, all threads (GB/s)", at + "/memory/threads_all/triad/best_gbs");
  }
  // The largest allreduce through Comm.
  for (const json* d : {&a, &b}) {
    json::json_pointer p("/interconnect/collectives/allreduce/comm");
    double v = NAN;
    if (d->contains(p) && (*d)[p].is_array() && !(*d)[p].empty())
      v = (*d)[p].back().value("busbw_gbs", NAN);
    if (d == &a)
      rows.push_back({"allreduce busbw, largest size (GB/s)", v, NAN, true});
    else
      rows.back().b = v;
  }
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line, "%-46s %14s %14s %9s\n", "", la.substr(0, 14).c_str(),
                lb.substr(0, 14).c_str(), "B / A");
  out += line;
  std::snprintf(line, sizeof line, "%-46s %14s %14s\n", "", a.value("host", "").substr(0, 14).c_str(),
                b.value("host", "").substr(0, 14).c_str());
  out += line;
  for (const Figure& f : rows) {
    if (std::isnan(f.a) && std::isnan(f.b)) continue;
    auto cell = [](double v) {
      char c[32];
      if (std::isnan(v)) return std::string("-");
      std::snprintf(c, sizeof c, "%.3g", v);
      return std::string(c);
    };
    std::string ratio = "-";
    if (!std::isnan(f.a) && !std::isnan(f.b) && f.a != 0) {
      char c[32];
      std::snprintf(c, sizeof c, "%.2fx", f.b / f.a);
      ratio = c;
    }
    std::snprintf(line, sizeof line, "%-46s %14s %14s %9s%s\n", f.label.substr(0, 46).c_str(),
                  cell(f.a).c_str(), cell(f.b).c_str(), ratio.c_str(),
                  f.higher_is_better ? "" : "  (lower is better)");
    out += line;
  }
  return out;
}

double probe_gemm_ceiling(const std::vector<std::string>& paths, int threads, const std::string& dtype) {
  for (const std::string& path : paths) {
    std::error_code ec;
    if (!fs::exists(path, ec)) continue;
    auto p = read_json(path);
    if (!p || !check_probe_document(*p, path).is_ok()) continue;
    if (const double best = gemm_ceiling(*p, threads, dtype); best > 0) return best;
  }
  return 0;
}

}  // namespace crucible::profile
