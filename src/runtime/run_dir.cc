#include "runtime/run_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <system_error>

#include "core/clock.h"
#include "core/file_io.h"
#include "core/process.h"
#include "runtime/heartbeat.h"

namespace crucible::runtime {

namespace fs = std::filesystem;

namespace {
std::string timestamp() { return wall_time("%Y%m%d-%H%M%S", false); }
}  // namespace

// The newest runs/<name>-* directory that holds a checkpoint ("" if none).
std::string newest_run(const std::string& name) {
  std::vector<std::string> dirs;
  std::error_code ec;
  for (auto it = fs::directory_iterator("runs", ec); !ec && it != fs::end(it); it.increment(ec)) {
    std::string base = it->path().filename().string();
    if (base.rfind(name + "-", 0) == 0 && has_checkpoints(it->path().string()))
      dirs.push_back(it->path().string());
  }
  std::sort(dirs.begin(), dirs.end());  // the timestamp suffix sorts by time
  return dirs.empty() ? "" : dirs.back();
}

std::string fresh_run_dir(const std::string& name) {
  const std::string base = "runs/" + name + "-" + timestamp();
  std::string dir = base;
  for (int n = 2; fs::exists(dir); ++n) dir = base + "-" + std::to_string(n);
  return dir;
}

Status RunOwnership::acquire(const std::string& dir, bool resume, const std::string& who) {
  const bool supervised = std::getenv(kSupervisorPidEnv) != nullptr;
  if (!supervised) CRUCIBLE_RETURN_IF_ERROR(owner_.acquire(dir, kOwnerLock, who, 0, kRunDirHint));
  CRUCIBLE_RETURN_IF_ERROR(attempt_.acquire(dir, kAttemptLock, who, supervised ? 30 : 0, kRunDirHint));
  if (owner_.created_dir() || attempt_.created_dir()) created_ = dir;
  if (!resume && has_checkpoints(dir))
    return Status::invalid("[run] " + dir + " already holds a run; pass --resume to continue it");
  return Status::ok();
}

RunOwnership::~RunOwnership() {
  std::error_code ec;
  if (!keep_ && !created_.empty()) fs::remove_all(created_, ec);
}

bool has_checkpoints(const std::string& run_dir) {
  std::error_code ec;
  for (auto it = fs::directory_iterator(run_dir + "/ckpt", ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    std::string base = it->path().filename().string();
    if (base.rfind("step_", 0) == 0 && base.find(".tmp") == std::string::npos) return true;
  }
  return false;
}

Result<RunPlan> plan_run(const RunRequest& req) {
  auto located = locate_run<Config>(req.run_dir, req.config_path, req.resume, "training run",
                                    [&](const std::string& path) { return load_config(path, req.overrides); });
  if (!located) return located.status();
  RunPlan plan{std::move(located->first), std::move(located->second), req.resume, std::nullopt};
  CRUCIBLE_RETURN_IF_ERROR(resolve_config(plan.config));
  // Absolute, so a resume from another directory names the same source.
  plan.config.init.from = absolute_init_path(plan.config.init.from);
  if (plan.config.init.from.empty()) return plan;
  if (!plan.resume) {
    auto src = find_init_source(plan.config.init.from);
    if (!src) return src.status();
    CRUCIBLE_RETURN_IF_ERROR(apply_init_source(*src, req.overrides, plan.config));
    plan.init = std::move(*src);
  } else if (auto own = load_config(plan.run_dir + "/config.toml"); own && own->init.from == plan.config.init.from) {
    // The same command again with --resume (as `crucible launch` restarts
    // it): the source's shape as the run recorded it, never read again. A
    // changed init.from is the checkpoint's to refuse.
    CRUCIBLE_RETURN_IF_ERROR(apply_init_source(recorded_init_source(*own), req.overrides, plan.config));
  }
  return plan;
}

Status prepare_run_dir(const RunPlan& plan) {
  const std::string& dir = plan.run_dir;
  std::error_code ec;
  fs::create_directories(dir + "/ckpt", ec);
  if (ec || access(dir.c_str(), W_OK) != 0)
    return Status::invalid("[run] cannot write run directory " + dir + ": " +
                           (ec ? ec.message() : std::string(std::strerror(errno))));
  std::string text = to_toml(plan.config);
  return write_file_atomic(dir + "/config.toml", text);
}

}  // namespace crucible::runtime
