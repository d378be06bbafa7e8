// A training run as the planner sees it: the config's layout as a
// plan::Candidate, and RUN/plan.json, the prediction for the run's own layout
// that the trainer stores before its first step and the report sets beside
// what the run measured (docs/plan.md, "Closed loop").
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "plan/calibrate.h"
#include "plan/candidate.h"
#include "plan/cluster.h"
#include "plan/time_model.h"
#include "profile/local_probe.h"
#include "runtime/config.h"

namespace crucible::runtime {

// The config's layout on `world` ranks (dp = world / (tp x pp), rounded
// down; plan::check says when it does not divide).
plan::Candidate candidate_of(const Config& cfg, int world);

// This machine as a cluster, for the prediction a run stores: the first of
// RUN/cluster.toml and ./cluster.toml (written by `crucible plan
// --cluster-from-probe`, refitted by `--calibrate`), else one made from
// `probe` (profile/local_probe.h: a probe document made on this machine),
// describing the node's CPUs or GPUs as `kind` says (a run: its device's).
// not_found when there is neither (the run then predicts its memory only).
Result<plan::Cluster> local_cluster(const std::string& run_dir, const profile::LocalProbe& probe,
                                    plan::NodeKind kind = plan::NodeKind::kAuto);
// The same for `crucible plan`: RUN/probe.json or ./probe.json, which must
// be well formed and made on this machine (else invalid, naming the file and
// why); nothing is measured and the machine cache is not consulted.
Result<plan::Cluster> local_cluster(const std::string& run_dir);

// The GEMM calls of one step of this run, as nn makes them, each with the
// planner's shape it counts toward (plan::forward_gemms: forward (m, n, k),
// backward (m, k, n) and (k, n, m)), for the probe to time inside a replayed
// step (profile/probe_step_gemms.h).
profile::StepGemms run_step_gemms(const Config& cfg, int world);

// RUN/plan.json's object: the prediction for the run's own layout on
// `cluster` (null: memory only, with the reason), and which cluster file it
// used.
nlohmann::json run_prediction(const Config& cfg, int world, const Result<plan::Cluster>& cluster);


// The log line of a prediction: "[plan] predicted 239 ms/step (forward 74,
// backward 159, ...), 8571 tokens/s, peak 285 MB on rank 0 (this machine
// (vm), cluster.toml)", or the memory alone and why.
std::string describe_prediction(const nlohmann::json& prediction);

// A training run's prediction (docs/plan.md), by rank 0 before its first
// step: on this machine's probe (profile/local_probe.h: one made here, else
// a quick probe now, the run's own GEMMs and attention timed in its step),
// written to RUN/plan.json and logged. `device`: rank 0's (a GPU run is
// predicted on its GPU's section of the probe, measured now where the
// document lacks it). Failing to write plan.json is a warning.
profile::LocalProbe predict_run(const Config& cfg, int world, const std::string& run, Device device,
                                const std::function<void(const std::string&)>& log);

// A finished run as the calibration sees it: RUN/config.toml's model and
// layout (the world from RUN/plan.json, else the config's tp x pp) and the
// medians of metrics.jsonl's phases over its steps after the first two.
Result<plan::Observation> observe_run(const std::string& run_dir);

}  // namespace crucible::runtime
