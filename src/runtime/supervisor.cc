#include "runtime/supervisor.h"

#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "ckpt/checkpoint.h"
#include "core/clock.h"
#include "core/file_io.h"
#include "runtime/attempt_runner.h"
#include "runtime/job_state.h"
#include "runtime/launcher.h"
#include "runtime/device_check.h"
#include "runtime/memory_estimate.h"
#include "runtime/reach.h"
#include "runtime/restart_policy.h"
#include "runtime/slurm.h"
#include "runtime/stop_signals.h"
#include "runtime/train_step.h"

namespace crucible::runtime {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// `launch --requeue` after a stop: Slurm puts the job back in the queue (and
// ends this allocation); its script then runs the same command again.
void requeue_slurm_job(EventLog& events) {
  const std::string id = slurm_job_id();
  if (id.empty()) {
    events.emit("requeue_skipped", {}, "--requeue: not inside a Slurm job; nothing to requeue");
    return;
  }
  events.emit("requeue", {{"job_id", id}}, "asking Slurm to requeue job " + id);
  const int rc = std::system(("scontrol requeue " + id).c_str());
  if (rc != 0)
    events.emit("requeue_failed", {{"job_id", id}, {"code", rc}},
                "scontrol requeue " + id + " failed (was the job submitted with --requeue?)");
}

// The job: its attempts, one after another, and what follows each.
class Supervisor {
 public:
  Supervisor(const SuperviseOptions& opt, RunPlan plan)
      : opt_(opt), plan_(std::move(plan)), attempts_(opt_, plan_, events_) {}
  Result<int> run();

 private:
  bool grow_possible(std::string& why) const;
  void write_job(const std::string& state, int attempt, int world) const {
    write_job_state(plan_.run_dir, {state, attempt, world, opt_.launch.ranks, int(::getpid())});
  }
  int64_t newest_valid_step() const {
    auto found = ckpt::find_latest_valid(plan_.run_dir + "/ckpt");
    return found ? found->step : 0;
  }

  const SuperviseOptions& opt_;
  RunPlan plan_;
  EventLog events_;
  AttemptRunner attempts_;
  // Hosts dropped after they were lost (their addresses); a grow brings them back.
  std::vector<std::string> dropped_;
  std::optional<Recovery> recovery_;
};

// A grow (SIGHUP) brings the dropped hosts back: only when each answers again.
bool Supervisor::grow_possible(std::string& why) const {
  for (const std::string& h : dropped_)
    if (!host_answers(h, kReachTimeout_s)) {
      why = "host " + h + " still does not answer";
      return false;
    }
  return true;
}

double mono_s() { return now_ns() * 1e-9; }

Result<int> Supervisor::run() {
  CRUCIBLE_RETURN_IF_ERROR(attempts_.open());
  CRUCIBLE_RETURN_IF_ERROR(events_.open(plan_.run_dir + "/events.jsonl"));
  const int full = opt_.launch.ranks;
  const int min_ranks = opt_.min_ranks > 0 ? std::min(opt_.min_ranks, full) : full;
  const AttemptLayout full_layout{full, plan_.config.train.grad_accum, opt_.launch.hostfile};
  const FaultConfig& fc = plan_.config.fault;
  AttemptLayout at = full_layout;
  int restarts = 0, failures_here = 0;
  std::vector<std::string> history;

  events_.emit("job_start",
               {{"run_dir", plan_.run_dir}, {"world", full}, {"min_ranks", min_ranks},
                {"max_restarts", fc.max_restarts}, {"resume_step", newest_valid_step()},
                {"heartbeat_window_s", fc.heartbeat_window_s}},
               "supervising " + std::to_string(full) + " ranks in " + plan_.run_dir + " (hang timeout " +
                   fmt_s(fc.hang_timeout_s) + ", heartbeat window " + fmt_s(fc.heartbeat_window_s) +
                   ", up to " + std::to_string(fc.max_restarts) + " restarts" +
                   (min_ranks < full ? ", down to " + std::to_string(min_ranks) + " ranks" : "") + ")");
  // Inside a Slurm allocation: how long the job waited in the queue.
  if (const std::optional<SlurmJob> job = current_slurm_job())
    events_.emit("queue",
                 {{"job_id", job->id}, {"submit", job->submit}, {"eligible", job->eligible}, {"start", job->start},
                  {"wait_s", job->wait_s}, {"reason", job->reason}, {"restarts", job->restarts}},
                 "Slurm job " + job->id + " waited " + fmt_s(job->wait_s) + " in the queue (submitted " + job->submit +
                     ", started " + job->start + (job->restarts ? ", requeued " + std::to_string(job->restarts) + "x" : "") +
                     ")");
  // A continued job (the same command run again) numbers its attempts on.
  const int first_attempt = read_job_state(plan_.run_dir).attempt + 1;
  for (int attempt = first_attempt;; ++attempt) {
    const bool resume = has_checkpoints(plan_.run_dir);
    write_job("running", attempt, at.world);
    AttemptResult r = attempts_.run(attempt, at, resume, recovery_,
                                    [this](std::string& why) { return grow_possible(why); });
    if (r.outcome == Outcome::kFinished) {
      // --stop-at ends a job early on purpose: it is not finished.
      if (r.step_reached < plan_.config.train.steps) {
        write_job("stopped", attempt, at.world);
        events_.emit("stopped", {{"attempt", attempt}, {"step", r.step_reached}},
                     "stopped at step " + std::to_string(r.step_reached) + " (--stop-at)");
        return 0;
      }
      write_job("finished", attempt, at.world);
      events_.emit("finished",
                   {{"attempt", attempt}, {"world", at.world}, {"restarts", restarts}, {"step", r.step_reached}},
                   "job finished" + (restarts ? " after " + std::to_string(restarts) +
                                                    (restarts == 1 ? " restart" : " restarts")
                                              : std::string()));
      return 0;
    }
    if (r.outcome == Outcome::kPreempted && attempts_.grow_requested() && r.clean_stop) {
      events_.emit("grow", {{"from", at.world}, {"to", full}, {"grad_accum", full_layout.accum}},
                   "checkpointed at step " + std::to_string(newest_valid_step()) + ": continuing on " +
                       std::to_string(full) + " ranks with grad_accum " + std::to_string(full_layout.accum));
      at = full_layout;
      dropped_.clear();
      failures_here = 0;
      continue;
    }
    if (r.outcome == Outcome::kPreempted) {
      write_job("preempted", attempt, at.world);
      const int64_t step = newest_valid_step();
      events_.emit("preempted", {{"attempt", attempt}, {"clean", r.clean_stop}, {"checkpoint_step", step}},
                   std::string(r.clean_stop ? "stopped after checkpointing" : "killed before every rank checkpointed") +
                       "; newest checkpoint: step " + std::to_string(step) + "; run the same command again to continue");
      if (opt_.requeue) requeue_slurm_job(events_);
      return 3;
    }
    if (r.outcome == Outcome::kBadInput) {
      write_job("failed", attempt, at.world);
      events_.emit("bad_input", {{"attempt", attempt}, {"message", r.message}},
                   "the job stopped on bad input (exit 2); not restarting");
      return 2;
    }
    // A failure: record it, then relaunch (or give up).
    const int64_t resume_step = newest_valid_step();
    const int64_t lost = std::max<int64_t>(0, r.step_reached - resume_step);
    history.push_back(r.what + " at step " + std::to_string(r.step_reached));
    json hosts = json::array();
    for (const HostLoss& h : r.hosts)
      hosts.push_back({{"host", h.host}, {"address", h.address}, {"ranks", h.ranks},
                       {"whole_host", h.whole_host}, {"reach", reach_name(h.reach)}});
    events_.emit("failure",
                 {{"attempt", attempt}, {"what", r.what}, {"ranks", r.culprits}, {"hosts", hosts},
                  {"phase", phase_name(r.phase)}, {"step", r.step_reached}, {"resume_step", resume_step},
                  {"steps_lost", lost}, {"detect_s", r.detect_s}, {"message", r.message}},
                 r.message + " [detected after " + fmt_s(r.detect_s) + "; " + std::to_string(lost) +
                     " steps since checkpoint step " + std::to_string(resume_step) + " lost]");
    ++failures_here;
    if (restarts >= fc.max_restarts) {
      write_job("failed", attempt, at.world);
      std::string list;
      for (size_t i = 0; i < history.size(); ++i) list += (i ? "; " : "") + std::to_string(i + 1) + ". " + history[i];
      events_.emit("gave_up", {{"attempts", attempt + 1}, {"checkpoint_step", resume_step}},
                   "giving up after " + std::to_string(restarts) + " restarts (fault.max_restarts = " +
                       std::to_string(fc.max_restarts) + "): " + list + ". The newest valid checkpoint is step " +
                       std::to_string(resume_step) + "; fix the cause and run the same command to continue");
      return kExitGaveUp;
    }
    // Elastic fallback, keeping the global batch (world x accum) whole: at
    // once without the hosts that stopped answering (relaunching onto them
    // cannot work), else after shrink_after failures at this size.
    const int total = at.world * at.accum;
    std::vector<std::string> drop;
    int lost_ranks = 0;
    for (const HostLoss& h : r.hosts)
      if (h.whole_host && h.reach == Reach::kNoAnswer && !h.address.empty() && !at.hostfile.empty()) {
        drop.push_back(h.address);
        lost_ranks += int(h.ranks.size());
      }
    int cap = at.world - 1;
    std::string hostfile = at.hostfile;
    if (!drop.empty() && at.world > min_ranks) {  // (at min_ranks there is nothing to shrink to)
      std::vector<std::string> all = dropped_;
      all.insert(all.end(), drop.begin(), drop.end());
      const std::string active = plan_.run_dir + "/hostfile.active";
      auto slots = write_hostfile_without(opt_.launch.hostfile, all, active);
      cap = at.world - lost_ranks;
      if (slots && *slots >= 0) cap = std::min(cap, *slots);
      if (slots && *slots != 0) hostfile = active;
    }
    if (at.world > min_ranks && (!drop.empty() || failures_here >= fc.shrink_after)) {
      if (const int w = shrunk_world(total, min_ranks, cap, plan_.config.dist.reproducible); w > 0) {
        std::string without;
        for (const HostLoss& h : r.hosts)
          if (std::find(drop.begin(), drop.end(), h.address) != drop.end())
            without += (without.empty() ? " without host " : ", ") + h.host + " (" + h.address + ")";
        events_.emit("shrink", {{"from", at.world}, {"to", w}, {"grad_accum", total / w}, {"dropped_hosts", drop}},
                     (drop.empty() ? std::to_string(failures_here) + " failures at " + std::to_string(at.world) + " ranks"
                                   : std::string("a host is lost")) +
                         ": continuing on " + std::to_string(w) + (w == 1 ? " rank" : " ranks") + without + " with grad_accum " +
                         std::to_string(total / w) + " (same global batch; SIGHUP to grow back)");
        at = {w, total / w, hostfile};
        dropped_.insert(dropped_.end(), drop.begin(), drop.end());
        failures_here = 0;
      }
    }
    ++restarts;
    const double backoff = restart_backoff_s(restarts, fc.restart_backoff_s);
    events_.emit("restart",
                 {{"attempt", attempt + 1}, {"world", at.world}, {"backoff_s", backoff}, {"resume_step", resume_step}},
                 "restart " + std::to_string(restarts) + "/" + std::to_string(fc.max_restarts) + " in " +
                     fmt_s(backoff) + " from checkpoint step " + std::to_string(resume_step) + " on " +
                     std::to_string(at.world) + " ranks");
    recovery_ = Recovery{r.detected_at, r.step_reached, resume_step, false, false};
    const int handled = SupervisorSignals::stops();
    const double until = mono_s() + backoff;
    while (mono_s() < until && SupervisorSignals::stops() == handled)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (SupervisorSignals::stops() != handled) {
      write_job("preempted", attempt, at.world);
      events_.emit("preempted", {{"attempt", attempt}, {"clean", true}, {"checkpoint_step", resume_step}},
                   "signal received while waiting to restart; newest checkpoint: step " + std::to_string(resume_step) +
                       "; run the same command again to continue");
      return 3;
    }
  }
}

}  // namespace

Result<int> supervise(const SuperviseOptions& opt) {
  // Which run: the one named, the newest unfinished one of this config's name
  // (the same command run again), or a new one.
  RunRequest req = opt.request;
  auto dir = run_to_continue(req.run_dir, req.resume, [&] { return load_config(req.config_path, req.overrides); });
  if (!dir) return dir.status();
  req.run_dir = *dir;
  if (!opt.launch.hostfile.empty())
    CRUCIBLE_RETURN_IF_ERROR(check_hostfile(opt.launch.hostfile, opt.launch.ranks));
  if (!req.run_dir.empty()) req.resume = has_checkpoints(req.run_dir);
  auto plan = plan_run(req);
  if (!plan) return plan.status();
  // All ranks on this machine (no hostfile): what they need together must fit
  // before any of them starts. A GPU run's ranks check the GPU's memory
  // themselves (the trainer), where the GPU is.
  const auto device = Device::parse(plan->config.run.device);
  if (opt.launch.hostfile.empty() && device && device->is_cpu())
    CRUCIBLE_RETURN_IF_ERROR(check_memory_fits(plan->config, opt.launch.ranks, 0, opt.launch.ranks,
                                               available_memory()));
  CRUCIBLE_RETURN_IF_ERROR(check_memory_budget(plan->config, opt.launch.ranks));
  CRUCIBLE_RETURN_IF_ERROR(check_device(plan->config));
  // The layout on this many ranks (tp x pp dividing them, the micro-batches
  // the pipeline needs): one line here, not a refusal every rank finds after
  // mpirun has started them.
  CRUCIBLE_RETURN_IF_ERROR(TrainStep::plan_layout(plan->config, opt.launch.ranks).status());
  return supervise_plan(opt, std::move(*plan));
}

Result<int> supervise_plan(const SuperviseOptions& opt, RunPlan plan_in) {
  std::optional<RunPlan> plan(std::move(plan_in));
  const std::string run = plan->run_dir;  // a copy: the plan moves into the Supervisor
  // The supervisor owns the run directory for the job's whole life (its ranks
  // take only the attempt lock); nothing is written before it holds it.
  DirLock owner;
  CRUCIBLE_RETURN_IF_ERROR(owner.acquire(run, kOwnerLock, "crucible launch", 0, kRunDirHint));
  {
    if (read_job_state(run).state == "finished") {
      // Finished at its train.steps; a relaunch asking for more continues it.
      auto found = ckpt::find_latest_valid(run + "/ckpt");
      const int64_t done = found ? found->step : 0;
      if (done >= plan->config.train.steps) {
        const long long steps = plan->config.train.steps;
        if (opt.command.empty())
          std::fprintf(stderr,
                       "[supervisor] %s has finished at step %lld (train.steps = %lld); nothing to "
                       "do (--set train.steps=N with N > %lld trains it further)\n",
                       run.c_str(), (long long)done, steps, (long long)done);
        else
          std::fprintf(stderr, "[supervisor] %s has finished at step %lld of %lld; nothing to do\n", run.c_str(),
                       (long long)done, steps);
        return 0;
      }
      std::fprintf(stderr, "[supervisor] %s finished at step %lld; continuing to train.steps = %lld\n",
                   run.c_str(), (long long)done, (long long)plan->config.train.steps);
    }
  }
  // Orphaned ranks (their mpirun killed) are re-parented here and reaped.
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  Result<int> code = [&] {
    SupervisorSignals signals;  // restored before the cleanup below
    Supervisor sup(opt, std::move(*plan));
    return sup.run();
  }();
  // A fresh job its ranks refused as bad input leaves nothing behind (the
  // directory was made here, for the lock; no step ran).
  if (code && *code == 2 && owner.created_dir() && !has_checkpoints(run)) {
    std::error_code rm;
    fs::remove_all(run, rm);
  }
  return code;
}

}  // namespace crucible::runtime
