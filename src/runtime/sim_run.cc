#include "runtime/sim_run.h"

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "ckpt/state_checkpoint.h"
#include "comm/comm.h"
#include "core/clock.h"
#include "core/file_io.h"
#include "core/threads.h"
#include "core/trace.h"
#include "profile/report.h"
#include "runtime/faults.h"
#include "runtime/heartbeat.h"
#include "runtime/metrics.h"
#include "runtime/run_dir.h"
#include "runtime/stop_signals.h"
#include "runtime/world.h"

namespace crucible::runtime {

namespace fs = std::filesystem;

Result<SimPlan> plan_sim(const SimRequest& req) {
  auto located = locate_run<SimConfig>(req.run_dir, req.config_path, req.resume, "run", [&](const std::string& path) {
    return load_sim_config(req.workload, path, req.overrides);
  });
  if (!located) return located.status();
  return SimPlan{std::move(located->first), std::move(located->second), req.resume};
}

namespace {

// The workload's part of the config (its section) must be the checkpoint's:
// a resumed simulation continues the same problem. The driver's keys
// (checkpoint interval, logging, faults) may change.
Status check_same_problem(const SimConfig& cfg, const nlohmann::json& saved, const std::string& ckpt) {
  const nlohmann::json now = to_json(cfg);
  const std::string w = cfg.workload;
  if (!saved.is_object() || !saved.contains(w))
    return Status::invalid("[sim] " + ckpt + " is not a checkpoint of a `" + w + "` run");
  const nlohmann::json a = saved[w], b = now[w];
  const nlohmann::json diff = nlohmann::json::diff(a, b);
  if (diff.empty() && saved.value("run", nlohmann::json::object()).value("seed", uint64_t(0)) == cfg.run.seed)
    return Status::ok();
  std::string what = "run.seed";
  if (!diff.empty()) {
    std::string path = diff[0].value("path", "");  // "/dt_s" or "/sub/key"
    for (char& c : path)
      if (c == '/') c = '.';
    what = w + path;
  }
  return Status::invalid("[sim] " + ckpt + " was made with another " + what +
                         "; a resumed run continues the same problem (start a new run for a new one)");
}

std::vector<ckpt::TensorView> views_of(const sim::State& s) {
  std::vector<ckpt::TensorView> v;
  for (const sim::StateArray& a : s.arrays) v.push_back({a.name, a.dtype, a.shape, a.bytes.data()});
  return v;
}

sim::State state_of(const ckpt::LoadedState& loaded) {
  sim::State s;
  s.scalars = loaded.state.sim.is_object() ? loaded.state.sim : nlohmann::json::object();
  for (const auto& [name, t] : loaded.arrays.tensors) s.arrays.push_back({name, t.dtype, t.shape, t.bytes});
  return s;
}

// The live line: "[sim md] step 1200/5000 (24%)  E -4.312  T 1.998 | 812 steps/s | ETA 5s".
std::string progress_line(const SimConfig& cfg, const sim::Workload& w, double steps_per_s) {
  const int64_t done = w.steps_done(), total = w.total_steps();
  char head[128];
  std::snprintf(head, sizeof head, "[sim %s] step %lld/%lld (%.0f%%)", cfg.workload.c_str(), (long long)done,
                (long long)total, total > 0 ? 100.0 * double(done) / double(total) : 100.0);
  std::string line = head;
  const std::string figures = w.progress();
  if (!figures.empty()) line += "  " + figures;
  if (steps_per_s > 0) {
    line += " | " + format_si(steps_per_s) + " steps/s";
    if (done < total) line += " | ETA " + format_duration(double(total - done) / steps_per_s);
  }
  return line;
}

// Rank 0's checkpoint of the gathered state; its outcome on every rank.
Status save(comm::Comm& comm, sim::Workload& w, const SimPlan& plan, const nlohmann::json& metrics_row,
            Console& console) {
  heartbeat_phase(w.steps_done(), Phase::kCheckpoint);
  trace::Scope scope("checkpoint", "ckpt");
  auto state = w.save();
  Status st = state.status();
  if (st && comm.rank() == 0) {
    ckpt::CheckpointState cs;
    cs.step = w.steps_done();
    cs.config = to_json(plan.config);
    cs.world = {{"world_size", comm.size()}, {"threads", num_threads()}};
    cs.metrics = metrics_row;
    cs.sim = state->scalars;
    st = ckpt::write_state_checkpoint(plan.run_dir + "/ckpt", cs, views_of(*state), plan.config.ckpt.keep);
    if (!st) console.info(st.message());
  }
  return agree(comm, st);
}

}  // namespace

Result<SimOutcome> run_sim(const SimPlan& plan_in, int64_t stop_at, Console& console) {
  auto world = comm::world();
  if (!world) return world.status();
  comm::Comm& comm = **world;
  const int rank = comm.rank(), W = comm.size();
  heartbeat_start(rank, W);
  heartbeat_phase(0, Phase::kSetup);
  console.set_quiet(rank != 0);
  SimPlan plan = plan_in;
  CRUCIBLE_RETURN_IF_ERROR(agree_on_run(comm, to_json(plan.config), plan.run_dir));
  plan.config.run.dir = plan.run_dir;
  trace::set_origin_ns(now_ns());
  const SimConfig& cfg = plan.config;
  const std::string& run = plan.run_dir;
  set_num_threads(cfg.run.threads);
  FaultInjector faults;
  CRUCIBLE_RETURN_IF_ERROR(agree(comm, faults.arm(cfg.fault, rank)));

  // The workload first: bad input is refused before anything is written.
  auto made = cfg.kind->make(comm, cfg.run.seed);
  CRUCIBLE_RETURN_IF_ERROR(agree(comm, made.status()));
  sim::Workload& w = **made;

  RunOwnership owner;
  if (rank == 0) {
    Status own = owner.acquire(run, plan.resume, "crucible sim");
    if (own && !plan.resume) {
      std::error_code ec;
      fs::create_directories(run + "/ckpt", ec);
      own = ec ? Status::invalid("[run] cannot write run directory " + run + ": " + ec.message())
               : write_file_atomic(run + "/config.toml", to_toml(cfg));
    }
    // What the report needs to know this directory is a simulation's.
    if (own)
      own = write_file_atomic(run + "/sim.json",
                              nlohmann::json{{"workload", cfg.workload}, {"total_steps", w.total_steps()}}.dump(1) + "\n");
    CRUCIBLE_RETURN_IF_ERROR(agree(comm, own));
    console.open_log(run + "/log.txt");
  } else {
    CRUCIBLE_RETURN_IF_ERROR(agree(comm, Status::ok()));
  }

  // Resume: the newest valid checkpoint, its files hashed by the ranks
  // together (each its share), then read by every rank.
  int64_t resumed_at = 0;
  nlohmann::json resumed_row;
  if (plan.resume) {
    const ckpt::VerifyShare share = verify_share(comm);
    auto found = ckpt::find_latest_valid(run + "/ckpt", &share);
    Status st = found.status();
    std::optional<ckpt::LoadedState> loaded;
    if (st) {
      auto l = ckpt::load_state_checkpoint(*found);
      st = l.status();
      if (st) st = check_same_problem(cfg, l->state.config, found->dir);
      if (st) loaded = std::move(*l);
    }
    CRUCIBLE_RETURN_IF_ERROR(agree(comm, st));
    for (const std::string& warning : found->warnings) console.info(warning);
    CRUCIBLE_RETURN_IF_ERROR(agree(comm, w.load(state_of(*loaded), loaded->state.step)));
    resumed_at = loaded->state.step;
    resumed_row = loaded->state.metrics;
    console.info("[sim] resumed " + run + " at step " + std::to_string(resumed_at) + " of " +
                 std::to_string(w.total_steps()));
  }
  owner.keep();
  MetricsWriter metrics;
  if (rank == 0) CRUCIBLE_RETURN_IF_ERROR(agree(comm, metrics.open(run + "/metrics.jsonl", resumed_at, resumed_row)));
  else CRUCIBLE_RETURN_IF_ERROR(agree(comm, Status::ok()));
  CRUCIBLE_RETURN_IF_ERROR(agree(comm, w.begin(run)));
  if (!plan.resume)
    console.info("[sim] " + cfg.workload + ": " + std::to_string(w.total_steps()) + " steps on " + std::to_string(W) +
                 " rank(s) x " + std::to_string(num_threads()) + " threads, in " + run);

  StopSignals signals;
  SimOutcome out;
  out.total_steps = w.total_steps();
  const int64_t trace_end = cfg.run.trace_from + cfg.run.trace_steps;  // exclusive
  Stopwatch run_clock, since_ckpt;
  int64_t rate_steps = 0;
  Stopwatch rate_clock;
  double rate = 0;
  nlohmann::json row;
  while (w.steps_done() < w.total_steps()) {
    const int64_t step = w.steps_done() + 1;
    trace::set_active(cfg.run.trace_steps > 0 && step >= cfg.run.trace_from && step < trace_end);
    heartbeat_phase(step, Phase::kForward);
    faults.before_forward(step);
    faults.before_backward(step);
    Stopwatch sw;
    {
      trace::Scope scope("step", "phase");
      CRUCIBLE_RETURN_IF_ERROR(agree(comm, w.step()));
    }
    const double step_ms = sw.elapsed_ms();
    heartbeat_phase(step, Phase::kSync);
    ++rate_steps;
    if (rate_clock.elapsed_s() >= 1.0 || rate == 0) {
      rate = double(rate_steps) / std::max(rate_clock.elapsed_s(), 1e-9);
      rate_steps = 0;
      rate_clock = Stopwatch();
    }
    row = w.metrics();
    if (!row.is_object()) row = nlohmann::json::object();
    row["step"] = step;
    row["step_ms"] = step_ms;
    row["elapsed_s"] = run_clock.elapsed_s();

    // One agreement carries both questions: stop (a signal, the supervisor),
    // and checkpoint now (rank 0's clock, so every rank saves together).
    const bool last = step == w.total_steps();
    const bool by_steps = cfg.ckpt.every > 0 && step % cfg.ckpt.every == 0;
    double flags[2] = {signals.pending() || heartbeat_stop_requested() ? 1.0 : 0.0,
                       rank == 0 && cfg.ckpt.every_s > 0 && since_ckpt.elapsed_s() >= cfg.ckpt.every_s ? 1.0 : 0.0};
    if (W > 1) CRUCIBLE_RETURN_IF_ERROR(comm.allreduce(flags, 2, comm::ReduceOp::kMax));
    const bool stop = flags[0] > 0 || (stop_at > 0 && step >= stop_at);
    if (last || by_steps || flags[1] > 0 || stop) {
      CRUCIBLE_RETURN_IF_ERROR(save(comm, w, plan, row, console));
      since_ckpt = Stopwatch();
      faults.after_checkpoint(step);
    }
    if (rank == 0) CRUCIBLE_RETURN_IF_ERROR(metrics.write(row));
    console.progress(progress_line(cfg, w, rate), last);
    if (stop && !last) {
      console.finish_progress();
      console.info("[sim] stopped at step " + std::to_string(step) + " with a checkpoint; continue with `crucible sim " +
                   cfg.workload + " --resume --run-dir " + run + "`");
      out.stopped_early = true;
      out.preempted = flags[0] > 0;
      break;
    }
  }
  console.finish_progress();
  heartbeat_phase(w.steps_done(), Phase::kDone);
  trace::set_active(false);
  CRUCIBLE_RETURN_IF_ERROR(write_run_trace(comm, run));
  out.steps_done = w.steps_done();
  if (!out.stopped_early) {
    auto summary = w.finish(run);
    CRUCIBLE_RETURN_IF_ERROR(agree(comm, summary.status()));
    if (rank == 0) {
      nlohmann::json results = *summary;
      if (!results.is_object()) results = nlohmann::json{{"summary", results}};
      results["workload"] = cfg.workload;
      results["steps"] = out.steps_done;
      results["ranks"] = W;
      results["threads"] = num_threads();
      results["seconds"] = run_clock.elapsed_s();
      CRUCIBLE_RETURN_IF_ERROR(write_file_atomic(run + "/results.json", results.dump(2) + "\n"));
      console.info("[sim] " + cfg.workload + " done in " + format_duration(run_clock.elapsed_s()) + ": " +
                   run + "/results.json");
    }
  }
  if (rank == 0) {
    Status s = profile::write_report(run);
    console.info(s ? "[report] " + run + "/report.html" : "[report] warning: " + s.message());
  }
  return out;
}

}  // namespace crucible::runtime
