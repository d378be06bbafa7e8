// The probe document a run consults on this machine: for the step time it
// predicts (plan.json) and the GEMM ceiling its MFU is set beside.
//
// A document is used only when it was made on this machine and is young
// enough (profile/machine.h): the first of the candidates (RUN/probe.json,
// ./probe.json) that is, else this machine's cached probe
// (<cache>/probe-<fingerprint>-t<threads>.json: one per thread count, whose
// figures it measured). Every file passed over is named in one
// line with the reason. Without one, a quick probe of the sections the
// planner reads (compute, memory, topology; about five seconds, bounded by
// each section's time budget) measures this machine now, and the result is
// cached both in the run directory and in the machine cache, so the next run
// here does not measure again. The machine cache measured while other
// processes held the CPUs (profile/load_watch.h) is measured again where the
// machine is quiet now, and replaced; used as it is otherwise, saying so.
// Not thread-safe (it measures with every OpenMP thread).
//
// A run on a GPU (`gpu` >= 0) needs the document's gpu section for its GPU:
// a document without it gets it measured now (that GPU alone, quick: about
// ten seconds) and added, and the run's own GEMM shapes and attention are
// timed on the GPU where the section lacks them (gpu.devices[i].gemm rows
// with "in_step", gpu.devices[i].attention). The document returned lists
// the run's GPU first (the one a GPU node's cluster file is made from).
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "profile/probe_step_gemms.h"

namespace crucible::profile {

struct LocalProbeOptions {
  std::vector<std::string> candidates;  // in order; missing files are skipped silently
  std::string write_to;                 // where the document used is kept (RUN/probe.json); empty: nowhere
  double max_age_days = 30;
  bool measure = true;                  // false: no quick probe, the result may be null
  bool use_cache = true;                // consult and fill the machine cache
  std::function<void(const std::string&)> log;
  // The GEMMs of the run's step, timed inside a replayed step on all
  // threads in `dtype` ("f32" | "bf16") where the document has no in-step
  // row of one of its shapes yet (profile/probe_step_gemms.h), so the
  // prediction's GEMM time is a measurement, not an interpolation.
  StepGemms step;
  std::string dtype = "f32";
  int gpu = -1;  // the run's GPU (cuda:N), or -1: a CPU run
};

struct LocalProbe {
  nlohmann::json doc;  // null when there is none
  std::string source;  // the file it came from, or "measured now"
};

LocalProbe local_probe(const LocalProbeOptions& opt);

// $CRUCIBLE_CACHE_DIR, else $XDG_CACHE_HOME/crucible, else
// $HOME/.cache/crucible; empty when none of them is set.
std::string machine_cache_dir();
// This machine's cached probe at this process's thread count:
// <cache>/probe-<fingerprint>-t<threads>.json; empty without a cache dir.
std::string machine_cache_file();

// The best valid GEMM GFLOP/s of `dtype` ("f32", "bf16") at `threads` in a
// probe document; 0 when it has none.
double gemm_ceiling(const nlohmann::json& probe, int threads, const std::string& dtype);

}  // namespace crucible::profile
