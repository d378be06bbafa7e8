// `crucible launch -n N -- sim WORKLOAD ...`: a simulation supervised as a
// training job is (runtime/supervisor.h): heartbeats, hang detection,
// restarts from the newest valid checkpoint, SIGTERM -> checkpoint and exit.
// Its steps are the workload's; no elastic fallback (a simulation's
// decomposition is not a global batch to keep).
#include <cstdio>

#include "comm/comm.h"
#include "runtime/job_state.h"
#include "runtime/launcher.h"
#include "runtime/sim_run.h"
#include "runtime/supervisor.h"

namespace crucible::runtime {

Result<int> supervise_sim(const SuperviseOptions& opt_in, const SimRequest& req_in, int64_t stop_at) {
  if (opt_in.min_ranks > 0 && opt_in.min_ranks < opt_in.launch.ranks)
    return Status::invalid("[launch] --min-ranks: a simulation keeps its rank count (no elastic fallback)");
  SimRequest req = req_in;
  auto dir = run_to_continue(req.run_dir, req.resume,
                             [&] { return load_sim_config(req.workload, req.config_path, req.overrides); });
  if (!dir) return dir.status();
  req.run_dir = *dir;
  if (!opt_in.launch.hostfile.empty())
    CRUCIBLE_RETURN_IF_ERROR(check_hostfile(opt_in.launch.hostfile, opt_in.launch.ranks));
  if (!req.run_dir.empty()) req.resume = has_checkpoints(req.run_dir);
  auto sim_plan = plan_sim(req);
  if (!sim_plan) return sim_plan.status();
  // The workload's steps, and its bad input said once here rather than by
  // every rank: made on one process, nothing written.
  auto single = comm::make_single_comm();
  auto probe = sim_plan->config.kind->make(*single, sim_plan->config.run.seed);
  if (!probe) return probe.status();

  SuperviseOptions opt = opt_in;
  opt.stop_at = stop_at;
  opt.command = {"sim", req.workload};
  if (!req.config_path.empty()) opt.command.push_back(req.config_path);
  for (const std::string& o : req.overrides) opt.command.insert(opt.command.end(), {"--set", o});
  RunPlan plan;  // the supervisor's view of the job: directory, steps, faults
  plan.run_dir = sim_plan->run_dir;
  plan.resume = sim_plan->resume;
  plan.config.run.dir = sim_plan->run_dir;
  plan.config.train.steps = (*probe)->total_steps();
  plan.config.train.grad_accum = 1;
  plan.config.fault = sim_plan->config.fault;
  return supervise_plan(opt, std::move(plan));
}

}  // namespace crucible::runtime
