// The supervisor behind `crucible launch -n N -- train ...` (DESIGN.md,
// "Supervision"; docs/fault_tolerance.md). It owns the run directory for the
// job's whole life and runs the ranks as attempts:
//
//   attempt k: mpirun (or srun) -n W crucible train ... --run-dir RUN [--resume]
//
// watching every rank's heartbeat (runtime/heartbeat.h) and process. A rank
// that dies, exits with an error, or makes no progress for
// fault.hang_timeout_s ends the attempt: the supervisor kills what is left,
// names the culprit, and relaunches from the newest valid checkpoint after a
// backoff, at most fault.max_restarts times; with min_ranks < ranks it falls
// back to a smaller world after fault.shrink_after consecutive failures,
// keeping the global batch through gradient accumulation. SIGTERM/SIGINT ask
// the ranks to checkpoint at the next step boundary and exit (code 3);
// running the same command again continues the run. Every event goes to
// RUN/events.jsonl and to the terminal.
//
// Exit codes: 0 finished, 2 bad input (not retried), 3 stopped by a signal
// after checkpointing, 4 gave up after fault.max_restarts relaunches.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "core/status.h"
#include "runtime/job_state.h"
#include "runtime/launcher.h"
#include "runtime/run_dir.h"

namespace crucible::runtime {

inline constexpr int kExitGaveUp = 4;

struct SuperviseOptions {
  LaunchSpec launch;
  int min_ranks = 0;  // 0: = launch.ranks (no elastic fallback)
  RunRequest request;  // the train command's config, overrides, --run-dir, --resume
  // Another command than `train` (`sim WORKLOAD CONFIG --set ...`): an
  // attempt runs it with --run-dir RUN [--resume] [--stop-at N] appended.
  std::vector<std::string> command;
  int64_t stop_at = 0;
  int metrics_port = 0;  // passed on to the ranks (train --metrics-port)
  std::string metrics_bind = "127.0.0.1";
  // Under Slurm: after a stop by a signal with every rank checkpointed, ask
  // Slurm to requeue this job (`scontrol requeue`), whose script runs the
  // same command again and continues the run.
  bool requeue = false;
};

// Runs the job to its end; returns the exit code (see above). Bad options
// (an unreadable config, a run directory in use) are an invalid Status.
Result<int> supervise(const SuperviseOptions& opt);
// The job of a planned run, whatever its command: `plan` gives the run
// directory, its steps (config.train.steps), fault settings (config.fault)
// and global batch (config.train.grad_accum). supervise() calls it for
// training, supervise_sim (runtime/sim_supervise.cc) for simulations.
Result<int> supervise_plan(const SuperviseOptions& opt, RunPlan plan);

// The same command run again continues its run: without --run-dir or
// --resume, and no run.dir in the config `load()` gives, the newest
// unfinished runs/<run.name>-* (said on stderr), else run_dir as given.
template <typename Load>
Result<std::string> run_to_continue(const std::string& run_dir, bool resume, Load&& load) {
  if (!run_dir.empty() || resume) return run_dir;
  auto named = load();
  if (!named) return named.status();
  if (!named->run.dir.empty()) return run_dir;
  std::string dir = newest_unfinished_run(named->run.name);
  if (!dir.empty()) std::fprintf(stderr, "[supervisor] continuing the unfinished run %s\n", dir.c_str());
  return dir;
}

}  // namespace crucible::runtime
