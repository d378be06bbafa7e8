// `crucible probe`: what decides training speed on this machine, measured and
// written down (probe.json, schema in docs/probe.md) for the planner, the
// reports and people: compute (GEMM per dtype and shape against the FMA
// peak), memory (STREAM), throttling under sustained load, topology (hwloc:
// caches, NUMA, PCI devices and their root ports), storage (the run and data
// directories' file systems) and, under `crucible launch -n N -- probe`, the
// interconnect between every pair of ranks and the collectives training uses.
// Every measurement is validated (a wrong result is reported, not timed).
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"

namespace crucible::profile {

inline constexpr const char* kProbeSchema = "crucible-probe/1";

struct ProbeOptions {
  bool quick = false;  // under 30 s on a 2-core VM; the full probe takes a few minutes
  // Directories whose file systems are measured (deduplicated by device);
  // default: the run and data directories' (runs/, data/, or the nearest
  // existing parent).
  std::vector<std::string> storage_dirs;
  double throttle_s = 0;  // 0: 20 s (quick: 3 s)
  // Time budgets of the compute and memory sections (0: their own defaults,
  // profile/probe_compute.h and probe_memory.h).
  double compute_budget_s = 0, memory_budget_s = 0;
  // Sections to run (empty: all): compute, memory, throttle, topology,
  // storage, interconnect.
  std::vector<std::string> sections;
  std::function<void(const std::string&)> log;  // progress, one line per section
};

// The document's head: schema, created (UTC), host, kernel, cpu, machine
// (profile/machine.h: what a run checks before it trusts the document),
// quick.
nlohmann::json probe_header(bool quick);

// The sections of `opt` that measure this machine alone (compute, memory,
// throttle, topology, storage: all but the interconnect) into `doc`, each
// timed and watched for load from other processes: doc[section],
// doc["durations_s"][section], doc["load"][section]. Progress and load
// warnings through opt.log.
void probe_local_sections(const ProbeOptions& opt, nlohmann::json& doc);

// Runs on every rank of the job (comm::world()); rank 0 measures the local
// sections while the others wait without spinning, and returns the whole
// document; other ranks return their part.
Result<nlohmann::json> run_probe(const ProbeOptions& opt);

// The readable table (what `crucible probe` prints).
std::string probe_table(const nlohmann::json& probe);

// Two probes side by side (two machines, or two dates): the key figures and
// B / A. invalid when either is not a probe document.
Result<std::string> compare_probes(const nlohmann::json& a, const nlohmann::json& b,
                                   const std::string& label_a, const std::string& label_b);

// The best GEMM GFLOP/s of `dtype` ("f32", "bf16") measured with `threads`
// threads in the first readable probe document of `paths`; 0 when none has one.
double probe_gemm_ceiling(const std::vector<std::string>& paths, int threads,
                          const std::string& dtype = "f32");

}  // namespace crucible::profile
