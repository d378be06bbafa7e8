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
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/dir_lock.h"
#include "core/status.h"
#include "runtime/config.h"
#include "runtime/init_source.h"

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
  // A fresh run with init.from: the source, read when planned (config's
  // model.*, data.tokenizer and data.vocab_size are its). A resume never
  // reads it: the run's own checkpoints hold the weights and its record.
  std::optional<InitSource> init;
};

Result<RunPlan> plan_run(const RunRequest& req);

// Creates the run directory (and ckpt/) and checks it is writable; writes the
// resolved config.toml atomically.
Status prepare_run_dir(const RunPlan& plan);

// Who owns a run directory, decided before anything is written into it: two
// lock files (core/dir_lock.h), each recording its holder:
//   RUN/owner.lock  the job: `crucible launch` for its whole life, or a plain
//                   `crucible train` (rank 0). Never waited for: a second
//                   job on a directory that a live one owns is refused at once,
//                   naming the holder.
//   RUN/train.lock  the ranks of one attempt (rank 0). A supervised relaunch
//                   waits for the last ranks of the attempt before it.
inline constexpr const char* kOwnerLock = "owner.lock";
inline constexpr const char* kAttemptLock = "train.lock";
inline constexpr const char* kRunDirHint = "wait for it to end or choose another --run-dir";

// What a training process (rank 0) holds for its run directory, taken
// before anything is written into it: the owner lock (unless the supervisor
// of `crucible launch` holds it: CRUCIBLE_SUPERVISOR_PID is set) and the
// attempt lock (a supervised relaunch waits 30 s for the ranks of the attempt
// before it). A fresh run is refused when the directory already holds
// checkpoints. A directory the locks created is removed on destruction unless
// keep() was called: bad input found before the first step leaves nothing.
class RunOwnership {
 public:
  RunOwnership() = default;
  RunOwnership(const RunOwnership&) = delete;
  RunOwnership& operator=(const RunOwnership&) = delete;
  ~RunOwnership();
  Status acquire(const RunPlan& plan) { return acquire(plan.run_dir, plan.resume, "crucible train"); }
  // The same for any kind of run (`crucible sim`): `who` names the holder.
  Status acquire(const std::string& run_dir, bool resume, const std::string& who);
  void keep() { keep_ = true; }

 private:
  DirLock owner_, attempt_;
  std::string created_;
  bool keep_ = false;
};

// runs/<name>-<YYYYmmdd-HHMMSS>, with -2, -3, ... when two runs start within
// one second.
std::string fresh_run_dir(const std::string& name);
// The newest runs/<name>-* directory that holds a checkpoint ("" if none).
std::string newest_run(const std::string& name);

// Which directory and config a run uses, for any kind of run (`train`,
// `sim`): `load(path)` reads a config ("" : the default) with the command's
// overrides; Config has run.dir and run.name.
//   --resume: the named directory, else the config's run.dir, else the newest
//   runs/<run.name>-* with a checkpoint; its config.toml unless a config file
//   is given; not_found when it holds no checkpoint.
//   fresh: --run-dir, else run.dir, else a fresh runs/<run.name>-<time>;
//   refused when it already holds checkpoints (of a `what`).
// Returns the config with run.dir set to the directory.
template <typename Config, typename Load>
Result<std::pair<Config, std::string>> locate_run(const std::string& run_dir, const std::string& config_path,
                                                  bool resume, const std::string& what, Load&& load);

// True when dir/ckpt holds at least one step_* directory.
bool has_checkpoints(const std::string& run_dir);

template <typename Config, typename Load>
Result<std::pair<Config, std::string>> locate_run(const std::string& run_dir, const std::string& config_path,
                                                  bool resume, const std::string& what, Load&& load) {
  std::string dir = run_dir;
  Result<Config> cfg = Status::invalid("");
  if (resume) {  // find the run first: its config.toml is the config unless one is given
    if (dir.empty()) {
      Result<Config> named = load(config_path);
      if (!named) return named.status();
      dir = named->run.dir.empty() ? newest_run(named->run.name) : named->run.dir;
      if (dir.empty())
        return Status::not_found("[run] --resume: no run of '" + named->run.name +
                                 "' with a checkpoint under runs/ (name one with --run-dir)");
    }
    if (!has_checkpoints(dir)) return Status::not_found("[run] --resume: " + dir + " holds no checkpoint to resume from");
    cfg = load(config_path.empty() ? dir + "/config.toml" : config_path);
    if (!cfg) return cfg.status();
  } else {
    cfg = load(config_path);
    if (!cfg) return cfg.status();
    if (dir.empty()) dir = !cfg->run.dir.empty() ? cfg->run.dir : fresh_run_dir(cfg->run.name);
    if (has_checkpoints(dir))
      return Status::invalid("[run] " + dir + " already holds a " + what +
                             "; pass --resume to continue it or choose another --run-dir");
  }
  cfg->run.dir = dir;
  return std::pair<Config, std::string>{std::move(*cfg), dir};
}

}  // namespace crucible::runtime
