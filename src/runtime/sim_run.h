// The driver of `crucible sim WORKLOAD`: everything a simulation run shares
// with a training run, around a sim::Workload (sim/workload.h):
//   - the run directory (runs/<run.name>-<date>-<time>, --run-dir, --resume)
//     with its locks (runtime/run_dir.h), the resolved config.toml, log.txt;
//   - the workload made before anything is written: bad input leaves nothing;
//   - one step at a time, with a live progress line (steps, the workload's
//     figures, steps/s, ETA) on rank 0, a metrics.jsonl row per step (the
//     workload's members, step_ms, elapsed_s), heartbeats and fault
//     injection under `crucible launch`, and the trace of a window of steps;
//   - checkpoints of the workload's State every ckpt.every steps and/or
//     ckpt.every_s seconds (rank 0 decides the time, every rank agrees), at a
//     stop by a signal or --stop-at, and at the end; a resumed run loads the
//     newest valid one and must give the uninterrupted run's result;
//   - at the end: RUN/results.json (the workload's summary), trace.json and
//     report.html.
// One call per process; every rank of the job calls run_sim.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "runtime/console.h"
#include "runtime/sim_config.h"

namespace crucible::runtime {

struct SimRequest {
  std::string workload;     // risk | climate | md
  std::string config_path;  // empty: the workload's embedded default (or RUN/config.toml on resume)
  std::vector<std::string> overrides;
  std::string run_dir;
  bool resume = false;
};

struct SimPlan {
  SimConfig config;
  std::string run_dir;
  bool resume = false;
};

// Which directory and config a sim command uses (nothing is written).
Result<SimPlan> plan_sim(const SimRequest& req);

struct SimOutcome {
  int64_t steps_done = 0, total_steps = 0;
  bool stopped_early = false;  // by --stop-at or a signal, after checkpointing
  bool preempted = false;      // by a signal (SIGTERM, SIGINT, SIGUSR1; the supervisor's stop)
};

// Runs (or continues) the simulation. stop_at > 0: checkpoint and stop after
// that step. Bad input: Status::invalid, nothing written (a fresh run).
Result<SimOutcome> run_sim(const SimPlan& plan, int64_t stop_at, Console& console);

struct SuperviseOptions;
// `crucible launch -n N -- sim ...` (runtime/sim_supervise.cc): the job
// supervised like a training job; returns its exit code (supervisor.h).
Result<int> supervise_sim(const SuperviseOptions& opt, const SimRequest& req, int64_t stop_at);

}  // namespace crucible::runtime
