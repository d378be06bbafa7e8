// `crucible sim risk|climate|md [CONFIG] [--set k=v]...`: the simulation
// workloads (sim/, docs/sim/), driven by runtime/sim_run.h like a training
// run: run directory, checkpoints, resume, supervision under `crucible
// launch -n N -- sim ...`, trace and report.
#include <memory>

#include "cli/commands.h"
#include "runtime/heartbeat.h"
#include "runtime/sim_run.h"
#include "runtime/trainer.h"
#include "sim/registry.h"

namespace crucible::cli {

void add_sim_options(CLI::App& cmd, runtime::SimRequest& req, int64_t& stop_at) {
  std::string names;
  for (const std::string& n : sim::kind_names()) names += (names.empty() ? "" : " | ") + n;
  cmd.add_option("workload", req.workload, names)->required();
  cmd.add_option("config", req.config_path, "TOML config (default: the workload's configs/sim/NAME.toml, embedded)");
  cmd.add_option("--run-dir", req.run_dir, "Run directory (default: runs/<run.name>-<date>-<time>)");
  cmd.add_option("--set", req.overrides, "Override a config key: section.key=value (repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd.add_flag("--resume", req.resume,
               "Continue from the newest valid checkpoint of --run-dir (or of the newest runs/<run.name>-*)");
  cmd.add_option("--stop-at", stop_at, "Checkpoint and stop after this many steps (continue later with --resume)")
      ->check(positive());
}

void add_sim_command(CLI::App& app) {
  auto req = std::make_shared<runtime::SimRequest>();
  auto stop_at = std::make_shared<int64_t>(0);
  auto* cmd = app.add_subcommand(
      "sim", "Run a simulation workload: risk (Monte Carlo portfolio risk), climate (shallow water on the "
             "sphere), md (Lennard-Jones molecular dynamics)");
  add_sim_options(*cmd, *req, *stop_at);
  cmd->callback([req, stop_at] {
    auto fail = [](int code, const std::string& msg) {
      runtime::heartbeat_exit(code, msg);
      throw ExitError(code, msg);
    };
    auto plan = runtime::plan_sim(*req);
    if (!plan) fail(exit_code(plan.status()), plan.status().message());
    runtime::Console console(plan->config.run.log_every_s);
    auto r = runtime::run_sim(*plan, *stop_at, console);
    if (!r) {
      console.finish_progress();
      console.log_only(r.status().message());
      fail(exit_code(r.status()), r.status().message());
    }
    if (r->preempted) {
      console.log_only("[sim] stopped by a signal");
      fail(runtime::kExitPreempted, "[sim] stopped by a signal");
    }
    runtime::heartbeat_exit(0, "");
  });
}

}  // namespace crucible::cli
