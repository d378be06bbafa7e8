#include "profile/probe_schema.h"

#include "core/json_io.h"
#include "core/json_schema.h"
#include "profile/probe.h"

namespace crucible::profile {

namespace {

using nlohmann::json;
using Need = JsonSchema::Need;

constexpr double kMaxGflops = 1e8;   // 100 PFLOP/s: no node reaches it
constexpr double kMaxGBs = 1e6;      // 1 PB/s
constexpr double kMaxGhz = 100;      // a clock; the probe's own plausibility check is stricter
constexpr double kMaxBytes = 1e15;   // 1 PB of memory or disk... per node
constexpr double kMaxSeconds = 1e9;  // microseconds or seconds of any measurement
constexpr int64_t kMaxThreads = 1 << 24;
constexpr int64_t kMaxDim = int64_t(1) << 31;

Status check_cpu(const json& p, const JsonSchema& s) {
  CRUCIBLE_RETURN_IF_ERROR(s.object(p, "cpu"));
  CRUCIBLE_RETURN_IF_ERROR(s.string(p, "cpu.model"));
  return s.integer(p, "cpu.hardware_threads", 1, kMaxThreads);
}

Status check_gemm_row(const json& g, const JsonSchema& s) {
  // What identifies a row and its figure are required (rows are matched on
  // them); the name only labels it.
  CRUCIBLE_RETURN_IF_ERROR(s.object(g, ""));
  CRUCIBLE_RETURN_IF_ERROR(s.string(g, "name"));
  CRUCIBLE_RETURN_IF_ERROR(s.string(g, "dtype", Need::kRequired));
  CRUCIBLE_RETURN_IF_ERROR(s.boolean(g, "valid", Need::kRequired));
  CRUCIBLE_RETURN_IF_ERROR(s.integer(g, "threads", 1, kMaxThreads, Need::kRequired));
  CRUCIBLE_RETURN_IF_ERROR(s.number(g, "gflops", 0, kMaxGflops, Need::kRequired));
  for (const char* d : {"m", "n", "k"}) CRUCIBLE_RETURN_IF_ERROR(s.integer(g, d, 1, kMaxDim));
  return s.number(g, "fraction_of_peak", 0, 1e6);
}

Status check_compute(const json& c, const JsonSchema& s) {
  CRUCIBLE_RETURN_IF_ERROR(s.boolean(c, "valid"));
  CRUCIBLE_RETURN_IF_ERROR(s.boolean(c, "bf16_native"));
  CRUCIBLE_RETURN_IF_ERROR(s.object(c, "peak"));
  CRUCIBLE_RETURN_IF_ERROR(s.number(c, "peak.clock_ghz", 0, kMaxGhz));
  for (const char* k :
       {"peak.derived_gflops_1", "peak.derived_gflops_all", "peak.measured_fma_gflops_all"})
    CRUCIBLE_RETURN_IF_ERROR(s.number(c, k, 0, kMaxGflops));
  CRUCIBLE_RETURN_IF_ERROR(s.integer(c, "peak.fma_units", 0, 64));
  CRUCIBLE_RETURN_IF_ERROR(s.integer(c, "peak.lanes", 1, 1024));
  CRUCIBLE_RETURN_IF_ERROR(s.integer(c, "peak.threads_all", 1, kMaxThreads));
  CRUCIBLE_RETURN_IF_ERROR(s.string(c, "peak.isa"));
  CRUCIBLE_RETURN_IF_ERROR(s.each(c, "attention", [](const json& r, const JsonSchema& at) {
    CRUCIBLE_RETURN_IF_ERROR(at.string(r, "dtype", Need::kRequired));
    CRUCIBLE_RETURN_IF_ERROR(at.integer(r, "threads", 1, kMaxThreads, Need::kRequired));
    for (const char* d : {"B", "T", "C", "NH"}) CRUCIBLE_RETURN_IF_ERROR(at.integer(r, d, 1, kMaxDim, Need::kRequired));
    return at.number(r, "gflops", 0, kMaxGflops, Need::kRequired);
  }));
  return s.each(c, "gemm", check_gemm_row);
}

Status check_memory(const json& m, const JsonSchema& s) {
  CRUCIBLE_RETURN_IF_ERROR(s.boolean(m, "valid"));
  for (const char* t : {"threads_1", "threads_all"}) {
    CRUCIBLE_RETURN_IF_ERROR(s.within(m, t, [](const json& r, const JsonSchema& at) {
      CRUCIBLE_RETURN_IF_ERROR(at.integer(r, "threads", 1, kMaxThreads));
      for (const char* k : {"copy", "scale", "add", "triad"}) {
        CRUCIBLE_RETURN_IF_ERROR(at.object(r, k));
        for (const char* f : {"best_gbs", "avg_gbs"})
          CRUCIBLE_RETURN_IF_ERROR(at.number(r, std::string(k) + "." + f, 0, kMaxGBs));
      }
      return Status::ok();
    }));
  }
  return Status::ok();
}

Status check_topology(const json& t, const JsonSchema& s) {
  for (const char* k : {"cores", "pus", "sockets"})
    CRUCIBLE_RETURN_IF_ERROR(s.integer(t, k, 0, kMaxThreads));
  return s.each(t, "numa_nodes", [](const json& n, const JsonSchema& at) {
    CRUCIBLE_RETURN_IF_ERROR(at.object(n, ""));
    CRUCIBLE_RETURN_IF_ERROR(at.integer(n, "cores", 0, kMaxThreads));
    return at.number(n, "memory_bytes", 0, kMaxBytes);
  });
}

// A measured link or message: latency and bandwidth.
Status check_link(const json& l, const JsonSchema& at) {
  CRUCIBLE_RETURN_IF_ERROR(at.object(l, ""));
  for (const char* k : {"latency_us", "time_us"})
    CRUCIBLE_RETURN_IF_ERROR(at.number(l, k, 0, kMaxSeconds));
  for (const char* k : {"bandwidth_gbs", "busbw_gbs", "algbw_gbs"})
    CRUCIBLE_RETURN_IF_ERROR(at.number(l, k, 0, kMaxGBs));
  CRUCIBLE_RETURN_IF_ERROR(at.number(l, "bytes", 0, kMaxBytes));
  return at.boolean(l, "valid");
}

Status check_interconnect(const json& ic, const JsonSchema& s) {
  CRUCIBLE_RETURN_IF_ERROR(s.integer(ic, "ranks", 1, kMaxThreads));
  CRUCIBLE_RETURN_IF_ERROR(s.each(ic, "pingpong", check_link));
  CRUCIBLE_RETURN_IF_ERROR(s.within(ic, "links", [](const json& links, const JsonSchema& at) {
    for (const char* k : {"intra_host", "inter_host"})
      CRUCIBLE_RETURN_IF_ERROR(at.within(links, k, check_link));
    return Status::ok();
  }));
  return s.within(ic, "collectives", [](const json& cs, const JsonSchema& at) {
    for (const auto& [name, c] : cs.items()) {
      (void)c;
      CRUCIBLE_RETURN_IF_ERROR(at.within(cs, name, [](const json& one, const JsonSchema& in) {
        return in.each(one, "comm", check_link);
      }));
    }
    return Status::ok();
  });
}

Status check_storage_row(const json& d, const JsonSchema& at) {
  CRUCIBLE_RETURN_IF_ERROR(at.object(d, ""));
  for (const char* k : {"dir", "filesystem", "for"}) CRUCIBLE_RETURN_IF_ERROR(at.string(d, k));
  for (const char* k : {"valid", "direct_io"}) CRUCIBLE_RETURN_IF_ERROR(at.boolean(d, k));
  for (const char* k : {"seq_read_gbs", "seq_write_gbs"})
    CRUCIBLE_RETURN_IF_ERROR(at.number(d, k, 0, kMaxGBs));
  for (const char* k : {"file_bytes", "free_bytes"})
    CRUCIBLE_RETURN_IF_ERROR(at.number(d, k, 0, 1e18));
  CRUCIBLE_RETURN_IF_ERROR(at.integer(d, "rand_reads", 0, INT64_MAX));
  CRUCIBLE_RETURN_IF_ERROR(at.object(d, "rand_read_4k_us"));
  for (const char* k : {"rand_read_4k_us.mean", "rand_read_4k_us.p50", "rand_read_4k_us.p99"})
    CRUCIBLE_RETURN_IF_ERROR(at.number(d, k, 0, kMaxSeconds));
  return Status::ok();
}

// The gpu section (profile/probe_gpu.h): counts, and every figure a finite
// number in range; a device that failed carries its error instead.
Status check_gpu(const json& g, const JsonSchema& s) {
  CRUCIBLE_RETURN_IF_ERROR(s.integer(g, "count", 0, 1 << 16, JsonSchema::kRequired));
  CRUCIBLE_RETURN_IF_ERROR(s.string(g, "why"));
  CRUCIBLE_RETURN_IF_ERROR(s.string(g, "peers_why"));
  CRUCIBLE_RETURN_IF_ERROR(s.each(g, "peers", [](const json& p, const JsonSchema& at) {
    CRUCIBLE_RETURN_IF_ERROR(at.object(p, ""));
    for (const char* k : {"from", "to"}) CRUCIBLE_RETURN_IF_ERROR(at.integer(p, k, 0, 1 << 16, JsonSchema::kRequired));
    CRUCIBLE_RETURN_IF_ERROR(at.boolean(p, "access"));
    return at.number(p, "gbs", 0, 1e5);
  }));
  return s.each(g, "devices", [](const json& d, const JsonSchema& at) {
    CRUCIBLE_RETURN_IF_ERROR(at.object(d, ""));
    CRUCIBLE_RETURN_IF_ERROR(at.integer(d, "index", 0, 1 << 16, JsonSchema::kRequired));
    for (const char* k : {"name", "pci_bus_id", "compute_capability", "error", "nvml_unavailable"})
      CRUCIBLE_RETURN_IF_ERROR(at.string(d, k));
    for (const char* k :
         {"bf16_gemm_tflops", "f32_gemm_tflops", "tf32_gemm_tflops", "copy_gbs", "h2d_pinned_gbs", "d2h_pinned_gbs",
          "h2d_pageable_gbs", "d2h_pageable_gbs", "launch_us", "memory_bytes"})
      CRUCIBLE_RETURN_IF_ERROR(at.number(d, k, 0, 1e15));
    CRUCIBLE_RETURN_IF_ERROR(at.object(d, "nvml"));
    CRUCIBLE_RETURN_IF_ERROR(at.each(d, "gemm", [](const json& r, const JsonSchema& row) {
      CRUCIBLE_RETURN_IF_ERROR(row.object(r, ""));
      for (const char* k : {"m", "n", "k"}) CRUCIBLE_RETURN_IF_ERROR(row.integer(r, k, 1, int64_t(1) << 31));
      CRUCIBLE_RETURN_IF_ERROR(row.string(r, "dtype"));
      return row.number(r, "tflops", 0, 1e5);
    }));
    CRUCIBLE_RETURN_IF_ERROR(at.each(d, "attention", [](const json& r, const JsonSchema& row) {
      CRUCIBLE_RETURN_IF_ERROR(row.object(r, ""));
      for (const char* k : {"B", "T", "C", "NH"}) CRUCIBLE_RETURN_IF_ERROR(row.integer(r, k, 1, int64_t(1) << 31));
      CRUCIBLE_RETURN_IF_ERROR(row.string(r, "dtype"));
      return row.number(r, "tflops", 0, 1e5);
    }));
    return at.object(d, "load");
  });
}

Status check_throttle(const json& t, const JsonSchema& s) {
  CRUCIBLE_RETURN_IF_ERROR(s.boolean(t, "valid"));
  CRUCIBLE_RETURN_IF_ERROR(s.boolean(t, "throttling"));
  CRUCIBLE_RETURN_IF_ERROR(s.integer(t, "threads", 1, kMaxThreads));
  for (const char* k : {"seconds", "threshold"})
    CRUCIBLE_RETURN_IF_ERROR(s.number(t, k, 0, kMaxSeconds));
  for (const char* k : {"drop", "clock_drop"}) CRUCIBLE_RETURN_IF_ERROR(s.number(t, k, -1e6, 1e6));
  for (const char* k : {"first_gflops", "last_gflops"})
    CRUCIBLE_RETURN_IF_ERROR(s.number(t, k, 0, kMaxGflops));
  for (const char* k : {"first_clock_ghz", "last_clock_ghz"})
    CRUCIBLE_RETURN_IF_ERROR(s.number(t, k, 0, kMaxGhz));
  // The packages' power under the load (RAPL), or why it was not measured.
  CRUCIBLE_RETURN_IF_ERROR(s.number(t, "power_w", 0, 1e6));
  for (const char* k : {"power_source", "power_unmeasured"})
    CRUCIBLE_RETURN_IF_ERROR(s.string(t, k));
  return s.each(t, "windows", [](const json& w, const JsonSchema& at) {
    CRUCIBLE_RETURN_IF_ERROR(at.object(w, ""));
    CRUCIBLE_RETURN_IF_ERROR(at.number(w, "t_s", 0, kMaxSeconds));
    CRUCIBLE_RETURN_IF_ERROR(at.number(w, "gflops", 0, kMaxGflops));
    return at.each(w, "clock_ghz", [](const json& c, const JsonSchema& in) {
      return in.number(c, "", 0, kMaxGhz);
    });
  });
}

// One host's own sections, under "hosts" (profile/probe_hosts.h).
Status check_host(const json& h, const JsonSchema& at) {
  CRUCIBLE_RETURN_IF_ERROR(at.object(h, ""));
  CRUCIBLE_RETURN_IF_ERROR(at.string(h, "host"));
  CRUCIBLE_RETURN_IF_ERROR(at.array(h, "ranks"));
  CRUCIBLE_RETURN_IF_ERROR(at.within(h, "compute", check_compute));
  return at.within(h, "memory", check_memory);
}

}  // namespace

Status check_probe_document(const json& p, const std::string& source) {
  const JsonSchema s("[probe]", source);
  CRUCIBLE_RETURN_IF_ERROR(s.object(p, ""));
  if (json_string_or(p, "schema", "") != kProbeSchema)
    return Status::invalid("[probe] " + source +
                           " is not a crucible probe document (\"schema\": \"" +
                           std::string(kProbeSchema) + "\")");
  for (const char* k : {"host", "created", "kernel"}) CRUCIBLE_RETURN_IF_ERROR(s.string(p, k));
  CRUCIBLE_RETURN_IF_ERROR(s.boolean(p, "quick"));
  CRUCIBLE_RETURN_IF_ERROR(check_cpu(p, s));
  CRUCIBLE_RETURN_IF_ERROR(s.within(p, "compute", check_compute));
  CRUCIBLE_RETURN_IF_ERROR(s.within(p, "memory", check_memory));
  CRUCIBLE_RETURN_IF_ERROR(s.within(p, "topology", check_topology));
  CRUCIBLE_RETURN_IF_ERROR(s.within(p, "interconnect", check_interconnect));
  CRUCIBLE_RETURN_IF_ERROR(s.within(p, "throttle", check_throttle));
  CRUCIBLE_RETURN_IF_ERROR(s.within(p, "gpu", check_gpu));
  CRUCIBLE_RETURN_IF_ERROR(s.each(p, "storage", check_storage_row));
  return s.each(p, "hosts", check_host);
}

}  // namespace crucible::profile
