#include "runtime/trainer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "ckpt/async_writer.h"
#include "ckpt/checkpoint.h"
#include "comm/comm.h"
#include "core/allocator.h"
#include "core/check.h"
#include "core/clock.h"
#include "core/json_io.h"
#include "core/process.h"
#include "core/threads.h"
#include "core/trace.h"
#include "data/loader.h"
#include "data/tokenizer.h"
#include "kernels/cuda/cuda.h"
#include "kernels/device_scope.h"
#include "nn/generator.h"
#include "nn/gpt.h"
#include "optim/adamw.h"
#include "parallel/data_parallel.h"
#include "profile/analysis.h"
#include "profile/cpu_peak.h"
#include "profile/probe.h"
#include "profile/trace_file.h"
#include "runtime/checkpointer.h"
#include "runtime/device_check.h"
#include "runtime/faults.h"
#include "runtime/gpu_world.h"
#include "runtime/heartbeat.h"
#include "runtime/init_source.h"
#include "runtime/memory_estimate.h"
#include "runtime/metrics.h"
#include "runtime/metrics_server.h"
#include "runtime/plan_run.h"
#include "runtime/resume_check.h"
#include "runtime/run_health.h"
#include "runtime/run_report.h"
#include "runtime/step_ceiling.h"
#include "runtime/step_energy.h"
#include "runtime/stop_signals.h"
#include "runtime/train_setup.h"
#include "runtime/train_step.h"
#include "runtime/world.h"

namespace crucible::runtime {

namespace fs = std::filesystem;

namespace {

// "step_0000020" of ".../ckpt/step_0000020": how messages name a checkpoint.
std::string ckpt_name(const std::string& dir) { return fs::path(dir).filename().string(); }

}  // namespace

Result<TrainResult> train(const RunPlan& plan_in, const TrainOptions& topt, Console& console) {
  auto world = comm::world();
  if (!world) return world.status();
  comm::Comm& comm = **world;
  const int rank = comm.rank(), W = comm.size();
  heartbeat_start(rank, W);  // under `crucible launch`: the supervisor watches from here
  PhaseMarker phases;
  console.set_quiet(rank != 0);
  RunPlan plan = plan_in;
  CRUCIBLE_RETURN_IF_ERROR(agree_on_config(comm, plan.config, plan.run_dir));
  // The ranks leave that agreement together: one time origin for their traces.
  trace::set_origin_ns(now_ns());
  // The layout before any other communication: a grid that cannot be is bad
  // input.
  auto planned = TrainStep::plan_layout(plan.config, W);
  CRUCIBLE_RETURN_IF_ERROR(agree(comm, planned.status()));
  const parallel::Layout layout = *planned;
  const parallel::Coords coords = layout.coords(rank);
  // The device, then memory: a run that cannot fit is refused before
  // anything is allocated or written (ranks on this machine: Open MPI's
  // local size; on a GPU, the model and its step live in the GPU's memory).
  auto gpus = open_gpu_world(comm, plan.config);  // several ranks on GPUs: placed, their device Comm
  CRUCIBLE_RETURN_IF_ERROR(agree(comm, gpus.status()));
  CRUCIBLE_RETURN_IF_ERROR(agree(comm, check_device(plan.config, gpus->device)));
  const Device device = gpus->device;
  {
    const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    const int here = local ? std::max(1, std::atoi(local)) : 1;
    Status fits = Status::ok();
    if (device.is_cpu()) {
      fits = check_memory_fits(plan.config, W, rank, here, available_memory());
    } else {
      auto free = kernels::cuda::free_memory(device.index);
      fits = free ? check_memory_fits(plan.config, W, rank, gpus->sharing, *free, "on " + device.str())
                  : free.status();
    }
    CRUCIBLE_RETURN_IF_ERROR(agree(comm, fits));
    CRUCIBLE_RETURN_IF_ERROR(agree(comm, check_memory_budget(plan.config, W)));
  }

  // ---- the run directory's owner, the checkpoint to resume, the data ----
  // Decided before anything is written: a second job on a directory that a
  // live one owns is refused at once. Under `crucible launch` the supervisor
  // owns the directory and a relaunch waits for the last ranks of the attempt
  // before it.
  RunOwnership ownership;
  CRUCIBLE_RETURN_IF_ERROR(agree(comm, rank == 0 ? ownership.acquire(plan) : Status::ok()));

  // A resumed run trains on the data its checkpoint pins, found from the
  // checkpoint itself (a resumed config never re-derives it).
  std::optional<ckpt::FoundCheckpoint> resume_from;
  std::optional<DataPin> pinned;
  if (plan.resume) {
    // The ranks share the checkpoint's verification (each file hashed once
    // per job, not once per rank) and the load below does not repeat it.
    const ckpt::VerifyShare share = verify_share(comm);
    auto point = find_resume_point(plan.config, plan.run_dir, &share);
    CRUCIBLE_RETURN_IF_ERROR(agree(comm, point.status()));
    // Before the run directory is written (its config.toml): a refused
    // resume leaves the run as it was.
    CRUCIBLE_RETURN_IF_ERROR(agree(comm, check_resume_batch(point->checkpoint.state.world,
                                                            plan.config.train.batch_size,
                                                            plan.config.train.grad_accum, layout.dp(),
                                                            ckpt_name(point->checkpoint.dir))));
    resume_from = std::move(point->checkpoint);
    pinned = point->pin;
    const int64_t at = resume_from->step;
    if (topt.stop_at > 0 && topt.stop_at <= at)
      return Status::invalid("[train] --stop-at " + std::to_string(topt.stop_at) + ": " + plan.run_dir +
                             " is already at step " + std::to_string(at) + " (" + ckpt_name(resume_from->dir) +
                             "); stop at a later step");
    if (at >= plan.config.train.steps) {  // nothing to train: the run's files stay as they are
      TrainResult done;
      done.run_dir = plan.run_dir;
      done.steps_done = at;
      done.already_finished = true;
      done.reporter = rank == 0;
      // A kill between the final checkpoint and its metrics row: the row is back.
      if (rank == 0) {
        MetricsWriter repair;
        CRUCIBLE_RETURN_IF_ERROR(repair.open(plan.run_dir + "/metrics.jsonl", at, resume_from->state.metrics));
      }
      console.info("[train] " + plan.run_dir + " has finished: step " + std::to_string(at) +
                   " of train.steps = " + std::to_string(plan.config.train.steps) +
                   "; nothing to train (--set train.steps=N with N > " + std::to_string(at) +
                   " trains it further)");
      phases.enter(at, Phase::kDone);
      return done;
    }
  }
  const Config& cfg = plan.config;
  const std::string& run = plan.run_dir;
  auto log = [&](const std::string& m) { console.info(m); };
  set_num_threads(cfg.train.threads);
  FaultInjector faults;
  CRUCIBLE_RETURN_IF_ERROR(faults.arm(cfg.fault, rank));

  Setup setup;
  CRUCIBLE_RETURN_IF_ERROR(agree(comm, prepare_data(cfg, comm, log, setup)));
  const DataPin data_pin{setup.ds->dir, setup.train_shard->info().checksum,
                         setup.val_shard->info().checksum, setup.tok->fingerprint()};
  if (pinned)
    CRUCIBLE_RETURN_IF_ERROR(agree(comm, check_data_pin(*pinned, data_pin, ckpt_name(resume_from->dir))));
  // A fine-tuning run's origin (runtime/init_source.h): read from its source
  // when fresh, from its own checkpoint when resumed.
  nlohmann::json init_record = plan.init ? plan.init->record() : resume_from ? resume_from->state.init : nullptr;
  if (!init_record.is_null())
    CRUCIBLE_RETURN_IF_ERROR(agree(comm, check_init_tokenizer(init_record, *setup.tok, setup.ds->dir)));
  CRUCIBLE_RETURN_IF_ERROR(agree(comm, rank == 0 ? prepare_run(plan, setup) : Status::ok()));
  if (rank == 0) console.open_log(run + "/log.txt");
  if (resume_from)
    for (const auto& w : resume_from->warnings) log(w);
  if (pinned)  // what the resumed run trains on, as a fresh run says it
    log("[data] dataset " + setup.ds->dir + ": " + std::to_string(setup.train_shard->size()) + " train / " +
        std::to_string(setup.val_shard->size()) + " validation tokens, pinned by " + ckpt_name(resume_from->dir) +
        " (shard checksums and tokenizer verified)");
  if (plan.resume && !pinned && resume_from->step > 0)
    log("[ckpt] warning: " + ckpt_name(resume_from->dir) +
        " records no dataset (written by an older crucible); resuming on " + setup.ds->dir +
        " unchecked");
  if (cfg.train.threads > hardware_threads())
    log("[train] warning: train.threads = " + std::to_string(cfg.train.threads) + " on " +
        std::to_string(hardware_threads()) + " cores: threads beyond the cores only contend");
  log("[run] " + run + (plan.resume ? " (resuming)" : "") + ", " + std::to_string(W) +
      (W > 1 ? " ranks (" + (gpus->comm ? gpus->comm->backend() : comm.backend()) + ") x " : " process x ") +
      std::to_string(num_threads()) + " threads");
  const data::TextTokenizer& tok = *setup.tok;

  const int B = cfg.train.batch_size, T = cfg.model.seq_len, accum = cfg.train.grad_accum;
  // Each data-parallel rank reads its share; the stages of one pipeline read
  // the same micro-batches (the first for its tokens, the last its targets).
  const int dp_rank = coords.dp, dp_size = layout.dp();
  auto loader =
      data::Loader::create(setup.train_shard, {B, T, cfg.train.seed, dp_rank, dp_size, accum, true});
  auto val_loader = data::Loader::create(setup.val_shard, {B, T, cfg.train.seed, 0, 1, 1, false});
  Status ls = !loader ? loader.status() : !val_loader ? val_loader.status() : Status::ok();
  CRUCIBLE_RETURN_IF_ERROR(agree(comm, ls));
  // The planner's prediction for this layout, after the data's checks (a
  // run they refuse measures nothing) and before the first step.
  profile::LocalProbe probe;  // rank 0's: the metrics' GEMM ceiling below comes from it too
  if (rank == 0) probe = predict_run(cfg, W, run, device, log);
  if (W > 1) CRUCIBLE_RETURN_IF_ERROR(comm::quiet_barrier(comm));
  // The validation set is train.eval_batches global batches (B x accum x dp
  // sequences each) from the start of the validation shard, so every layout
  // of one global batch evaluates the same tokens; it is cut to whole global
  // batches when the shard is shorter.
  const uint64_t per_global = uint64_t(accum) * uint64_t(dp_size), val_micro = (*val_loader)->steps_per_epoch();
  uint64_t eval_micro = std::min<uint64_t>(uint64_t(cfg.train.eval_batches) * per_global,
                                           val_micro / per_global * per_global);
  if (eval_micro == 0) eval_micro = val_micro;
  const int eval_batches = int(eval_micro);
  // ---- this rank's part of the model, its optimizer and step, checkpoints ----
  Config placed = cfg;  // this rank's GPU (the stored config keeps what the user named)
  placed.run.device = device.str();
  auto made = TrainStep::create(placed, gpus->comm ? *gpus->comm : comm);
  CRUCIBLE_RETURN_IF_ERROR(agree(comm, made.status()));
  TrainStep& ts = **made;
  // From here on this thread's kernels run on the run's device
  // (kernels/device_scope.h); the model's parameters and arenas live there.
  kernels::DeviceScope on_device(device);
  if (layout.tp() > 1) {
    auto hosts = comm::host_names(comm);
    CRUCIBLE_RETURN_IF_ERROR(hosts.status());
    if (const std::string w = parallel::tp_hosts_warning(layout, *hosts); !w.empty()) log(w);
  }
  nn::GPT& model = ts.model();
  optim::AdamW& adam = ts.optimizer();
  parallel::DataParallel* dp = ts.data_parallel();
  const bool pipeline = layout.pp() > 1;
  const bool parts = pipeline || layout.tp() > 1;  // a rank holds part of the model
  const std::string ckpt_dir = run + "/ckpt";
  int64_t step = 0;
  if (plan.resume) {
    // Every rank reads the checkpoint; a checkpoint of any world size fits
    // any other (full-layout tensors; each optimizer takes its shard).
    auto resume = [&]() -> Status {
      const ckpt::FoundCheckpoint* found = &*resume_from;
      auto state = ckpt::load_checkpoint(found->dir, model.params(), &adam, /*part=*/parts, /*verified=*/true);
      if (!state) return state.status();
      // An imported run's step 0 (runtime/hf_import.cc) has read no data yet.
      if (!(state->step == 0 && state->loader.is_null())) {
        auto ls = data::loader_state_from_json(state->loader);
        if (!ls) return ls.status();
        CRUCIBLE_RETURN_IF_ERROR((*loader)->restore(*ls));
      }
      step = state->step;
      phases.enter(step, Phase::kSetup);
      const int saved_world = int(json_int_or(state->world, "world_size", 1));
      // Reproducible mode gives the same bits across world sizes only at the
      // same micro-batch and threads per rank (docs/training.md).
      const int saved_b = int(json_int_or(state->world, "batch_size", B));
      const int saved_t = int(json_int_or(state->world, "threads", num_threads()));
      if (cfg.dist.reproducible && (saved_b != B || saved_t != num_threads()))
        log("[train] warning: dist.reproducible: " + ckpt_name(found->dir) + " was trained at " +
            std::to_string(saved_b) + " sequences x " + std::to_string(saved_t) +
            " threads per rank, this run uses " + std::to_string(B) + " x " + std::to_string(num_threads()) +
            ": its weights will not be bit-identical to an uninterrupted run");
      log("[ckpt] resumed from " + found->dir + " at step " + std::to_string(step) +
          (saved_world != W ? " (written by " + std::to_string(saved_world) + " ranks, now " +
                                  std::to_string(W) + ")"
                            : ""));
      return Status::ok();
    };
    CRUCIBLE_RETURN_IF_ERROR(agree(comm, resume()));
  } else if (plan.init) {  // every rank reads the weights, as a resume does; fresh AdamW moments
    CRUCIBLE_RETURN_IF_ERROR(agree(comm, load_init_weights(*plan.init, model.params(), parts)));
    log(plan.init->describe());
  }
  std::unique_ptr<MetricsServer> live;
  if (topt.metrics_port > 0) {
    auto server = MetricsServer::start(topt.metrics_bind, topt.metrics_port + rank, cfg.run.name, rank);
    CRUCIBLE_RETURN_IF_ERROR(agree(comm, server ? Status::ok() : server.status()));
    live = std::move(*server);
    log("[metrics] serving live metrics on http://" +
        (topt.metrics_bind == "0.0.0.0" ? host_name() : topt.metrics_bind) + ":" +
        std::to_string(live->port()) + "/metrics" + (W > 1 ? " (rank r on port + r)" : ""));
  }
  MetricsWriter metrics, rank_metrics;
  Status ms = rank == 0 ? metrics.open(run + "/metrics.jsonl", step,
                                       resume_from ? resume_from->state.metrics : nullptr)
                         : Status::ok();
  if (ms.is_ok() && W > 1)
    ms = rank_metrics.open(run + "/metrics.rank" + std::to_string(rank) + ".jsonl", step);
  CRUCIBLE_RETURN_IF_ERROR(agree(comm, ms));
  // Each step's joules from the hardware's own counter (or why not).
  StepEnergy energy;
  std::string energy_note;
  CRUCIBLE_RETURN_IF_ERROR(energy.open(comm, device, &energy_note));
  log(energy_note);

  // Checkpoints are written by rank 0 on a background thread from a host
  // snapshot; the loop pays for the snapshot and, when the previous save is
  // still being written, for waiting on it (at most one in flight).
  Checkpointer checkpoints(comm, ts, cfg, ckpt_dir);
  auto save = [&](int64_t at, bool flush, const nlohmann::json& row, StepMetrics& m) -> Status {
    ckpt::CheckpointState st;
    st.step = at;
    st.config = to_json(cfg);
    st.loader = data::to_json((*loader)->state());
    st.world = {{"world_size", W},       {"zero", cfg.dist.zero},     {"batch_size", B},
                {"grad_accum", accum},   {"threads", num_threads()},  {"dp", dp_size},
                {"tp", layout.tp()},     {"pp", layout.pp()},         {"pp_virtual", layout.virtual_stages()}};
    st.data = data_pin.to_json();
    st.init = init_record;
    st.metrics = row;
    // No random draws happen during training (no dropout); the seed and the
    // stream layout are all the RNG state there is.
    st.rng = {{"seed", cfg.train.seed}, {"init_streams", "fnv1a64(param name)"}};
    return checkpoints.save(st, flush, m);
  };
  // A failed collective (a rank gone, the network down) is reported, not an abort.
  auto all_sum = [&](double v) -> Result<double> {
    if (W > 1) CRUCIBLE_RETURN_IF_ERROR(comm.allreduce(&v, 1, comm::ReduceOp::kSum));
    return v;
  };

  // ---- the loop ----
  const double tokens_per_step = double(B) * T * accum * dp_size;
  const double flops_per_step = cfg.model.flops_per_token(T) * tokens_per_step;
  // MFU's ceilings (runtime/step_ceiling.h): the device's peak of this
  // precision, and the best GEMM it showed (rank 0 writes the metrics).
  const bool bf16 = cfg.train.precision == "bf16";
  const StepCeiling ceiling = step_ceiling(device, bf16, probe.doc, log);
  const double peak_gflops = ceiling.peak_gflops, gemm_ceiling_gflops = ceiling.gemm_gflops;
  const bool peak_known = ceiling.known;
  // Validation: the same eval_batches micro-batches for any layout, dealt
  // out over the data-parallel ranks and forwarded through each pipeline;
  // the mean over all of them (the loss comes from the last stages).
  auto evaluate = [&]() -> Result<double> {
    const int mine = (eval_batches - dp_rank + dp_size - 1) / dp_size;
    auto sum = ts.evaluate(mine, [&](int k, int32_t* toks, int32_t* tgts) {
      CRUCIBLE_CHECK((*val_loader)->restore({0, uint64_t(dp_rank + k * dp_size), 0}).is_ok(),
                     "[train] validation loader position");
      (*val_loader)->next(toks, tgts);
    });
    if (!sum) return sum.status();
    auto total = all_sum(*sum);
    if (!total) return total.status();
    return *total / eval_batches;
  };

  StopSignals signals;
  RunHealth health;
  TrainResult result;
  result.run_dir = run;
  result.reporter = rank == 0;
  const int64_t total = cfg.train.steps;
  const int64_t first_step = step;
  Stopwatch run_clock;
  double ema_step_s = 0;
  double bubble_wait_s = 0, bubble_compute_s = 0;  // this rank's, over the steps after the first
  log("[train] " + std::to_string(nn::GPT::flat_params(cfg.model)) + " parameters" +
      (parts ? " (" + std::to_string(model.params().numel()) + " on rank 0, " + layout.describe() + ")"
                : std::string()) +
      ", " +
      std::to_string(int64_t(tokens_per_step)) + " tokens per step, steps " + std::to_string(step) +
      " -> " + std::to_string(total) +
      (dp ? ", " + std::to_string(dp->num_buckets()) + " gradient buckets, ZeRO-" +
                std::to_string(cfg.dist.zero) + (ts.embedding_rows_apart() ? ", wte's embedding rows apart" : "")
          : "") +
      (ts.graphs_apply() ? ", the steady step replayed as a CUDA graph" : ""));
  // The trace window: steps [trace_from, trace_from + trace_steps).
  const int64_t trace_end = cfg.run.trace_from + cfg.run.trace_steps;
  // Everything is prepared and validated: from here the run directory is the
  // run's, whatever happens.
  ownership.keep();
  auto in_trace_window = [&](int64_t s) { return s >= cfg.run.trace_from && s < trace_end; };
  if (plan.init && step == 0) {  // fine-tuning: the source's loss on this corpus, metrics.jsonl's step 0
    phases.enter(step, Phase::kEval);
    Stopwatch sw;
    auto val = evaluate();
    if (!val) return val.status();
    init_record["val_loss_before"] = *val;
    if (rank == 0)
      CRUCIBLE_RETURN_IF_ERROR(metrics.write(nlohmann::json{{"step", 0}, {"val_loss", *val}, {"eval_ms", sw.elapsed_ms()}}));
    log(finetune_summary(init_record, -1));
  }
  result.val_loss_before = init_record.is_null() ? -1.0 : init_record.value("val_loss_before", -1.0);
  while (step < total) {
    trace::set_active(in_trace_window(step + 1));
    // On a GPU the trace window's kernels are timed by CUDA events
    // (kernels/kernel_timer.h): their device time on the GPU's trace track.
    if (!device.is_cpu()) CRUCIBLE_RETURN_IF_ERROR(kernels::cuda::set_kernel_timing(in_trace_window(step + 1)));
    StepMetrics m;
    m.step = step + 1;
    m.lr = optim::lr_schedule(step, float(cfg.optim.lr), cfg.optim.warmup_steps, total,
                              float(cfg.optim.min_lr_ratio));
    energy.begin();
    Stopwatch step_clock;
    const data::LoaderState step_start = (*loader)->state();
    int next_micro = 0;  // the loader's position within the step
    auto load = [&](int micro, int32_t* toks, int32_t* tgts) {
      if (micro != next_micro) {  // the reproducible tree's order
        data::LoaderState at = step_start;
        at.micro = uint64_t(micro);
        CRUCIBLE_CHECK((*loader)->restore(at).is_ok(), "[train] loader position in the step");
      }
      next_micro = micro + 1;
      if (!pipeline) phases.enter(step + 1, Phase::kData);
      return (*loader)->next(toks, tgts);
    };
    // A pipeline's stages run different actions: one phase for the whole
    // schedule (the same on every rank) and each action reported within it,
    // so the supervisor can name a stuck stage and micro-batch.
    if (pipeline) phases.enter(step + 1, Phase::kPipeline);
    auto before = [&](const parallel::Action& a) {
      const bool fwd = a.op == parallel::Op::kForward || a.op == parallel::Op::kSendActivation ||
                       a.op == parallel::Op::kRecvActivation;
      if (pipeline)
        heartbeat_action(int(a.op), a.micro, a.chunk, parallel::stage_of(layout.pp(), coords.pp, a.chunk));
      else
        phases.enter(step + 1, fwd ? Phase::kForward : Phase::kBackward);
      if (a.op == parallel::Op::kForward) faults.before_forward(step + 1);
      if (a.op == parallel::Op::kBackward || a.op == parallel::Op::kBackwardInput) faults.before_backward(step + 1);
    };
    // A CUDA graph (run.cuda_graphs) records a step once the first has made
    // what a step allocates, and never a timed one (its CUDA events).
    ts.allow_graph(step > first_step && !in_trace_window(step + 1) && !faults.armed());
    CRUCIBLE_RETURN_IF_ERROR(ts.run(m.lr, load, before, [&](Phase p) { phases.enter(step + 1, p); }, m));
    if (std::string w = ts.take_graph_warning(); !w.empty()) log("[train] warning: " + w);
    m.step_ms = step_clock.elapsed_ms();
    CRUCIBLE_RETURN_IF_ERROR(energy.end(comm, tokens_per_step, m));
    if (!device.is_cpu() && kernels::cuda::kernel_timing())
      CRUCIBLE_RETURN_IF_ERROR(kernels::cuda::collect_kernel_times(nullptr).status());
    phases.enter(step + 1, Phase::kSync);
    // The mean over the global batch: each pipeline's last stage holds its
    // data-parallel share's.
    auto loss_total = all_sum(ts.has_loss() ? m.loss : 0.0);
    if (!loss_total) return loss_total.status();
    m.loss = *loss_total / dp_size;
    if (step > first_step) {  // the bubble after the first step (warm-up)
      bubble_wait_s += m.pipeline_wait_ms * 1e-3;
      bubble_compute_s += (m.forward_ms + m.backward_ms) * 1e-3;
    }
    ++step;
    if (!std::isfinite(m.loss))
      return Status::internal("[train] loss is " + std::to_string(m.loss) + " at step " +
                              std::to_string(step) + " (diverged; lower optim.lr?)");

    const bool last = step == total;
    // Every rank stops at the same step: the signal may reach them apart.
    // One allreduce carries both step-end questions: did any rank get a stop
    // request, did a background save fail (rank 0).
    checkpoints.reap(false, &m);
    double flags[2] = {signals.pending() || heartbeat_stop_requested() ? 1.0 : 0.0,
                       checkpoints.error() ? 0.0 : 1.0};
    if (W > 1) CRUCIBLE_RETURN_IF_ERROR(comm.allreduce(flags, 2, comm::ReduceOp::kSum));
    if (flags[1] > 0) {
      Status failed = agree(comm, checkpoints.error());
      CRUCIBLE_CHECK(!failed.is_ok(), "[train] a failed save is agreed on by every rank");
      return failed;
    }
    const bool stop = (topt.stop_at > 0 && step >= topt.stop_at) || flags[0] > 0;
    if (last || (cfg.train.eval_every > 0 && step % cfg.train.eval_every == 0)) {
      phases.enter(step, Phase::kEval);
      Stopwatch sw;
      auto val = evaluate();
      if (!val) return val.status();
      m.val_loss = *val;
      m.eval_ms = sw.elapsed_ms();
      result.val_loss = m.val_loss;
    }
    AllocatorStats mem = Allocator::of(device).stats();  // the memory the step computes in
    m.mem_in_use = mem.in_use;
    m.mem_peak = mem.peak;
    m.mem_cached = mem.cached;
    StepMetrics agg = m;  // the job's view: the slowest rank's times
    if (W > 1) {
      double t[7] = {m.step_ms,      m.data_wait_ms, m.forward_ms,      m.backward_ms,
                     m.optimizer_ms, m.comm_ms,      double(m.mem_peak)};
      CRUCIBLE_RETURN_IF_ERROR(comm.allreduce(t, 7, comm::ReduceOp::kMax));
      agg.step_ms = t[0], agg.data_wait_ms = t[1], agg.forward_ms = t[2], agg.backward_ms = t[3];
      agg.optimizer_ms = t[4], agg.comm_ms = t[5], agg.mem_peak = uint64_t(t[6]);
    }
    agg.tokens_per_s = tokens_per_step / (agg.step_ms * 1e-3);
    if (agg.energy_j >= 0)
      agg.power_w = agg.energy_j / (agg.step_ms * 1e-3);  // over the slowest rank's step
    agg.mfu = profile::honest_mfu(flops_per_step / (agg.step_ms * 1e-3) * 1e-9, W * peak_gflops, peak_known);
    if (gemm_ceiling_gflops > 0)  // NaN (left out) above 1: a ceiling below the step is a wrong ceiling
      agg.mfu_of_gemm =
          profile::honest_mfu(flops_per_step / (agg.step_ms * 1e-3) * 1e-9, W * gemm_ceiling_gflops, true);
    const bool kill_after = faults.kills_after_checkpoint(step);
    if (last || stop || kill_after || (cfg.ckpt.every > 0 && step % cfg.ckpt.every == 0)) {
      phases.enter(step, Phase::kCheckpoint);
      // The checkpoint carries this step's row (without its own timings): it
      // may be on disk before the row is in metrics.jsonl.
      CRUCIBLE_RETURN_IF_ERROR(save(step, last || stop || kill_after, to_json(agg), m));
      faults.after_checkpoint(step);
      agg.ckpt_stall_ms = m.ckpt_stall_ms, agg.ckpt_wait_ms = m.ckpt_wait_ms;
      agg.ckpt_flush_ms = m.ckpt_flush_ms, agg.ckpt_write_ms = m.ckpt_write_ms;
    }
    phases.enter(step, Phase::kSync);
    if (W > 1) CRUCIBLE_RETURN_IF_ERROR(rank_metrics.write(m));
    health.record_step(m);
    if (rank == 0) CRUCIBLE_RETURN_IF_ERROR(metrics.write(agg));
    if (live) live->update(W > 1 ? m : agg);
    result.last_loss = m.loss;

    ema_step_s = ema_step_s == 0 ? agg.step_ms * 1e-3 : 0.9 * ema_step_s + 0.1 * agg.step_ms * 1e-3;
    char line[256];
    std::snprintf(
        line, sizeof line,
        "[train] step %lld/%lld | loss %.4f%s | lr %.2e | %s tok/s | MFU %s%s | ETA %s",
        (long long)step, (long long)total, m.loss,
        m.val_loss >= 0 ? (" | val " + std::to_string(m.val_loss).substr(0, 6)).c_str() : "", m.lr,
        format_si(agg.tokens_per_s).c_str(), profile::format_mfu(agg.mfu).c_str(),
        agg.j_per_token >= 0 ? (" | " + profile::format_energy_per_token(agg.j_per_token)).c_str()
                             : "",
        format_duration(ema_step_s * double(total - step)).c_str());
    console.progress(line, last || stop || m.val_loss >= 0 || step == first_step + 1);
    if (stop && !last) {
      console.finish_progress();
      result.stopped_early = true;
      result.preempted = !(topt.stop_at > 0 && step >= topt.stop_at);
      log(std::string("[train] ") + (result.preempted ? "signal received" : "--stop-at reached") +
          ": checkpoint step " + std::to_string(step) + " saved" +
          (std::getenv(kSupervisorEnv) ? std::string()  // the supervisor says how to continue
                                       : "; continue with --resume --run-dir " + run));
      break;
    }
  }
  console.finish_progress();
  phases.enter(step, Phase::kDone);
  trace::set_active(false);
  CRUCIBLE_RETURN_IF_ERROR(write_run_trace(comm, run));
  result.steps_done = step;
  // What the layout implies each rank moves per step (no dp: nothing to check).
  const double expected_comm =
      dp ? profile::expected_comm_bytes_per_step(int64_t(model.params().numel()), dp_size, cfg.dist.zero,
                                                 int(sizeof(float)))
         : 0.0;
  if (pipeline) {  // the bubble each stage measured, against the schedule's theory
    // Rank 0 is stage 0 of the first pipeline: its figure next to the worst.
    const double mine = bubble_compute_s > 0 ? bubble_wait_s / bubble_compute_s : 0;
    double worst = mine;
    CRUCIBLE_RETURN_IF_ERROR(comm.allreduce(&worst, 1, comm::ReduceOp::kMax));
    char line[200];
    std::snprintf(line, sizeof line,
                  "[pipeline] bubble (time waiting / compute): stage 0 %.1f%%, worst stage %.1f%%; "
                  "theory for %s with pp=%d, v=%d, m=%d: %.1f%%",
                  100 * mine, 100 * worst, layout.schedule().c_str(), layout.pp(), layout.virtual_stages(),
                  accum, 100 * ts.theoretical_bubble());
    log(line);
  }
  auto warnings = health.finish(comm, expected_comm);
  if (!warnings) return warnings.status();
  for (const std::string& w : *warnings) log(w);
  // The HTML report, at the end of every run that ends well (stopped early too).
  if (rank != 0) return result;
  if (result.stopped_early) {
    write_run_report(run, cfg, W, rank, log);
    return result;
  }

  result.unigram_entropy = unigram_entropy(*setup.val_shard, tok.vocab_size());
  const double gap = 100.0 * (1.0 - result.val_loss / result.unigram_entropy);
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "[train] done in %s: validation loss %.4f vs %.4f nats/token, the unigram entropy "
                "of the validation tokens (%.1f%% %s)",
                format_duration(run_clock.elapsed_s()).c_str(), result.val_loss,
                result.unigram_entropy, std::fabs(gap),
                gap >= 0 ? "below" : "ABOVE: not learned yet");
  log(buf);
  if (result.val_loss_before >= 0) log(finetune_summary(init_record, result.val_loss));

  if (cfg.run.sample_tokens > 0 && !device.is_cpu()) {
    log("[train] samples run on the CPU: crucible generate --run-dir " + run + " samples from this run's checkpoint");
  } else if (cfg.run.sample_tokens > 0 && parts) {
    log("[train] samples need the whole model on one rank: crucible generate --run-dir " + run +
        " samples from this run's checkpoint");
  } else if (cfg.run.sample_tokens > 0) {
    nn::Generator gen(model);
    Rng rng(cfg.train.seed, 0x5a3b1e);
    for (int i = 0; i < 3; ++i) {
      if (signals.pending()) {  // the run is done and saved; a signal ends the extras
        log("[train] signal received: samples skipped");
        break;
      }
      auto ids =
          nn::generate(gen, {}, cfg.run.sample_tokens, tok.eos_id(), {0.8f, 40, tok.vocab_size()},
                       rng, {}, [&] { return signals.pending() != 0; });
      auto eos = std::find(ids.begin(), ids.end(), tok.eos_id());  // one document
      ids.erase(eos, ids.end());
      log("[sample " + std::to_string(i + 1) + "] " + tok.decode(ids));
    }
  }
  write_run_report(run, cfg, W, rank, log);
  return result;
}

}  // namespace crucible::runtime
