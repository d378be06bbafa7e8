// The run directory (DESIGN.md): runs/NAME/ holds config.toml (resolved),
// metrics.jsonl, log.txt, tokenizer.model, ckpt/, and later trace.json and
// report.html. This file decides which directory a `crucible train` command
// uses and with which config, before anything is trained:
//   - a fresh run gets runs/<run.name>-<YYYYmmdd-HHMMSS> unless --run-dir or
//     run.dir names one; a directory that already holds checkpoints is refused
//     without --resume (nothing of an earlier run is overwritten);
//   - --resume continues the run in --run-dir (or the newest runs/<run.name>-*
//     holding a checkpoint) with its resolved config.toml, unless a config
//     file is given; --set overrides apply either way.
#pragma once
#include <string>
#include <vector>

#include "core/status.h"
#include "runtime/config.h"

namespace crucible::runtime {

struct RunRequest {
  std::string config_path;  // empty: the embedded default (or RUN/config.toml on resume)
  std::vector<std::string> overrides;
  std::string run_dir;  // --run-dir
  bool resume = false;
};

struct RunPlan {
  Config config;
  std::string run_dir;
  bool resume = false;
};

Result<RunPlan> plan_run(const RunRequest& req);

// Creates the run directory (and ckpt/) and checks it is writable; writes the
// resolved config.toml atomically.
Status prepare_run_dir(const RunPlan& plan);

// An exclusive lock on RUN/train.lock, held by rank 0 of the job training in
// RUN: two jobs never write one run directory (a relaunch after a failure
// waits for the last ranks of the attempt before it). flock: released by the
// kernel when its holder dies, whatever the cause.
class RunDirLock {
 public:
  RunDirLock() = default;
  RunDirLock(const RunDirLock&) = delete;
  RunDirLock& operator=(const RunDirLock&) = delete;
  ~RunDirLock();
  // Creates run_dir if needed; waits up to wait_s for the lock.
  Status acquire(const std::string& run_dir, double wait_s);

 private:
  int fd_ = -1;
};

// True when dir/ckpt holds at least one step_* directory.
bool has_checkpoints(const std::string& run_dir);

}  // namespace crucible::runtime
