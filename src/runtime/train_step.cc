#include "runtime/train_step.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "core/clock.h"
#include "kernels/step_parts.h"
#include "plan/candidate.h"
#include "runtime/plan_run.h"

namespace crucible::runtime {

namespace {
nn::GPTPart computing(nn::GPTPart part, const Config& cfg) {
  part.precision = dtype_named(cfg.train.precision);
  part.recompute = nn::recompute_policy(cfg.train.recompute);
  part.head_chunk = cfg.train.fused_head ? nn::fused_head_rows(cfg.model, part) : 0;
  part.device = *Device::parse(cfg.run.device);  // validated with the config
  return part;
}
}  // namespace

nn::GPTPart stage_part(const parallel::Layout& layout, const parallel::Coords& at, const Config& cfg) {
  return computing(parallel::stage_part(layout, at, cfg.model), cfg);
}

nn::GPTPart whole_part(const Config& cfg) { return computing(nn::GPTPart::whole(cfg.model), cfg); }

TrainStep::~TrainStep() = default;

Result<parallel::Layout> TrainStep::plan_layout(const Config& cfg, int world) {
  const int accum = cfg.train.grad_accum;
  // A world the grid does not divide: Layout::make's message names it.
  if (world % std::max<int64_t>(1, int64_t(cfg.dist.tp) * cfg.dist.pp) != 0) {
    auto grid = parallel::Layout::make(layout_spec(cfg), world, cfg.model, accum);
    if (!grid) return grid.status();
  }
  auto layout = plan::check(cfg.model, candidate_of(cfg, world));
  if (!layout) return layout.status();
  const parallel::Layout& L = *layout;
  auto schedule = parallel::make_schedule(L.schedule(), L.pp(), L.virtual_stages(), accum);
  if (!schedule) return schedule.status();
  CRUCIBLE_RETURN_IF_ERROR(parallel::check_schedule(*schedule));
  if (cfg.dist.reproducible) {
    auto pow2 = [](int x) { return x > 0 && (x & (x - 1)) == 0; };
    if (!pow2(L.dp()) || !pow2(accum))
      return Status::invalid("[config] dist.reproducible: needs a power-of-two number of data-parallel ranks (" +
                             std::to_string(L.dp()) + ") and train.grad_accum (" + std::to_string(accum) + ")");
    // The tree adds each micro-batch's gradient as one quantum: a schedule
    // that interleaves micro-batches' gradient passes mixes them.
    if (L.pp() > 1 && (L.virtual_stages() > 1 || L.schedule() == "zb-h1"))
      return Status::invalid("[config] dist.reproducible: the " + L.schedule() +
                             " schedule interleaves micro-batches' gradient passes; use dist.pp_schedule = \"1f1b\"");
  }
  return layout;
}

Result<std::unique_ptr<TrainStep>> TrainStep::create(const Config& cfg, comm::Comm& world) {
  std::unique_ptr<TrainStep> t(new TrainStep());
  t->cfg_ = cfg;
  const int accum = cfg.train.grad_accum;
  auto layout = plan_layout(cfg, world.size());
  if (!layout) return layout.status();
  t->layout_ = *layout;
  const parallel::Layout& L = t->layout_;
  t->coords_ = L.coords(world.rank());
  auto schedule = parallel::make_schedule(L.schedule(), L.pp(), L.virtual_stages(), accum);
  if (!schedule) return schedule.status();
  auto groups = parallel::make_groups(world, L);
  if (!groups) return groups.status();
  t->groups_ = std::move(*groups);
  if (L.pp() > 1) {  // the embedding group: this pipeline's first and last stage
    const int p = t->coords_.pp;
    const bool ends = p == 0 || p == L.pp() - 1;
    auto tied = world.split(ends ? t->coords_.dp * L.tp() + t->coords_.tp : L.world() + world.rank(), p);
    if (!tied) return tied.status();
    t->tied_ = std::move(*tied);
  }
  if (L.tp() > 1) t->tp_ = std::make_unique<parallel::CommTensorParallel>(*t->groups_.tp);
  // Data parallel with overlap in one stage: wte's head gradient reduced as
  // soon as the head is done, its embedding rows apart (parallel/embedding_rows.h).
  nn::GPTPart part = stage_part(L, t->coords_, cfg);
  const bool rows = !cfg.dist.reproducible && cfg.dist.overlap && cfg.dist.embedding_rows &&
                    parallel::EmbeddingGradRows::applies(L, cfg.model, accum, cfg.train.batch_size);
  part.embedding_rows = rows;
  t->model_ = std::make_unique<nn::GPT>(cfg.model, part, t->tp_.get());
  if (rows) {
    t->rows_ = std::make_unique<parallel::EmbeddingGradRows>(
        *t->groups_.dp, size_t(accum) * cfg.train.batch_size * cfg.model.seq_len, cfg.model.n_embd, part.device);
    t->model_->set_embedding_rows(t->rows_->sink());
  }
  // Each parameter draws from its own stream keyed by its name: every part's
  // initial weights are the whole model's (nn/params.h).
  t->model_->init_weights(cfg.train.seed);
  if (cfg.dist.reproducible)
    t->tree_ = std::make_unique<parallel::TreeReducer>(*t->groups_.dp, t->model_->params(), accum);
  else if (L.dp() > 1)
    t->dp_ = std::make_unique<parallel::DataParallel>(
        *t->groups_.dp, t->model_->params(),
        parallel::DataParallelConfig{cfg.dist.bucket_mb, cfg.dist.zero, dtype_named(cfg.dist.grad_dtype)});
  optim::AdamWConfig acfg{float(cfg.optim.lr),    float(cfg.optim.beta1),        float(cfg.optim.beta2),
                          float(cfg.optim.eps),   float(cfg.optim.weight_decay), float(cfg.optim.grad_clip),
                          dtype_named(cfg.optim.moments)};
  t->adam_ = std::make_unique<optim::AdamW>(t->model_->params(), acfg,
                                           t->dp_ ? t->dp_->optimizer_shard() : std::vector<optim::Range>{});
  t->stage_ = std::make_unique<parallel::PipelineStage>(*t->model_, *t->groups_.pp, std::move(*schedule),
                                                        t->coords_.pp, cfg.train.batch_size, cfg.model.seq_len);
  return t;
}

double TrainStep::theoretical_bubble() const {
  return parallel::theoretical_bubble(layout_.schedule(), layout_.pp(), layout_.virtual_stages(),
                                      cfg_.train.grad_accum);
}

Status TrainStep::tie_embedding() {
  if (!tied_ || tied_->size() < 2) return Status::ok();
  const nn::ParamSpec* wte = model_->params().find("transformer.wte.weight");
  CRUCIBLE_CHECK(wte, "[train] the first and last stage hold wte");
  return tied_->allreduce(model_->params().grads() + wte->offset, wte->numel);
}

Status TrainStep::run(float lr, const std::function<double(int, int32_t*, int32_t*)>& load,
                      const std::function<void(const parallel::Action&)>& before,
                      const std::function<void(Phase)>& phase, StepMetrics& m) {
  const int accum = cfg_.train.grad_accum;
  if (rows_) rows_->sink()->count = 0;  // this step's embedding rows, appended by every micro-batch's backward
  // Pre-scaled so that summing gradients over the data-parallel ranks gives
  // the global mean.
  const float grad_scale = 1.0f / float(accum * layout_.dp());
  parallel::StepHooks hooks;
  hooks.before = before;
  // The reproducible tree visits micro-batches in bit-reversed order.
  hooks.load = [&](int micro, int32_t* tokens, int32_t* targets) {
    return load(tree_ ? parallel::bit_reversed(micro, accum) : micro, tokens, targets);
  };
  if (tree_) hooks.after_backward = [&](int) { tree_->add_quantum(); };
  const bool overlap = dp_ && cfg_.dist.overlap;
  if (overlap) {
    dp_->begin_reduction();
    // Offset 0 (wte's end) waits for the tied sum after the schedule: inside
    // it, the last stage would wait for the first while the first waits for
    // the last stage's gradient.
    hooks.grads_ready = [&](size_t from) {
      if (from > 0 || !tied_) dp_->on_grads_ready(from);
    };
  }
  // The step's scalars in: this step's lr and AdamW count, the sums zeroed;
  // the micro-batches in. Nothing else crosses to the host until the
  // read-back at the end.
  kernels::StepScalars* scalars = adam_->begin_step(lr);
  kernels::discard_part_times();  // a step abandoned half-way leaves none behind
  m.data_wait_ms += stage_->load(hooks) * 1e3;
  auto run_body = [&] { return body(grad_scale, scalars, hooks, phase, m); };
  const int64_t t0 = now_ns();
  bool graph = false;  // the step ran as a CUDA graph (captured now, or replayed)
  if (graph_allowed_ && graphs_apply() && graph_refusal_.empty()) {
    if (!graph_) graph_ = std::make_unique<kernels::StepGraph>();
    if (graph_->captured()) {
      phase(Phase::kForward);  // the device's whole step, queued in one launch
      CRUCIBLE_RETURN_IF_ERROR(graph_->replay());
    } else {
      CRUCIBLE_RETURN_IF_ERROR(graph_->capture(run_body));
      if (!graph_->captured()) {  // CUDA refused; the body ran uncaptured, and so will the next steps
        graph_refusal_ = graph_->refusal();
        graph_warning_ = "the step runs without CUDA graphs: " + graph_refusal_;
        graph_.reset();
      } else if (!graph_->split()) {
        graph_warning_ = "the replayed steps are not split into forward, backward and optimizer: " +
                         graph_->unsplit();
      }
    }
    graph = graph_ && graph_->captured();
  } else {
    CRUCIBLE_RETURN_IF_ERROR(run_body());
  }
  // The step's one read-back: its loss and gradient norm (waits for its kernels).
  const kernels::StepScalars out = adam_->end_step();
  // The parts' times on the device that ran them (kernels/step_parts.h).
  auto parts = kernels::take_part_times();
  if (!parts) return parts.status();
  // A graph's step whole, launch to read-back; its parts are its own events'
  // (a split graph), or none (0) where CUDA refused them.
  if (graph) m.graph_ms = (now_ns() - t0) * 1e-6;
  using kernels::StepPart;
  m.forward_ms += (*parts)[StepPart::kForward] * 1e3;
  // Time inside communication calls during backward is communication.
  m.backward_ms += std::max(0.0, (*parts)[StepPart::kBackward] * 1e3 - comm_in_backward_ms_);
  m.optimizer_ms += (*parts)[StepPart::kOptimizer] * 1e3;
  m.loss = out.loss_sum / accum;
  m.grad_norm = std::sqrt(out.grad_sq);
  return Status::ok();
}

// One rank (so no data-, tensor- or pipeline-parallel group and no embedding
// rows), not the reproducible tree.
bool TrainStep::graphs_apply(const Config& cfg, int world) {
  return cfg.run.cuda_graphs && world == 1 && !cfg.dist.reproducible &&
         kernels::StepGraph::available(*Device::parse(cfg.run.device));
}

Status TrainStep::body(float grad_scale, kernels::StepScalars* scalars, const parallel::StepHooks& hooks,
                       const std::function<void(Phase)>& phase, StepMetrics& m) {
  const bool overlap = dp_ && cfg_.dist.overlap;
  comm_in_backward_ms_ = 0;
  auto times = stage_->run(grad_scale, &scalars->loss_sum, hooks);
  if (!times) return times.status();
  if (tp_) {
    CRUCIBLE_RETURN_IF_ERROR(tp_->error());
    m.tp_comm_ms = tp_->take_seconds() * 1e3;
  }
  m.pipeline_wait_ms = times->wait * 1e3;
  last_wait_s_ = times->wait;

  phase(Phase::kReduce);
  const int64_t t0 = now_ns();
  CRUCIBLE_RETURN_IF_ERROR(tie_embedding());
  m.comm_ms += (now_ns() - t0) * 1e-6;
  if (tree_) {
    auto waited = tree_->finish();
    if (!waited) return waited.status();
    m.comm_ms += *waited * 1e3;
  } else if (dp_) {
    if (!overlap) dp_->begin_reduction();
    comm_in_backward_ms_ = dp_->seconds_in_backward() * 1e3;
    auto waited = dp_->finish_reduction();  // starts what has not started (wte's bucket after the tie)
    if (!waited) return waited.status();
    m.comm_ms += *waited * 1e3;
  }
  double rows_bytes = 0;
  if (rows_) {
    const nn::ParamSpec* wte = model_->params().find("transformer.wte.weight");
    auto added = rows_->add_all(model_->params().grads() + wte->offset, model_->vocab(), rows_bytes);
    if (!added) return added.status();
    m.comm_ms += *added * 1e3;
  }
  // The norm counts every element once: the data-parallel shards (ZeRO),
  // the tensor-parallel shards and the pipeline stages are summed; wte's copy
  // on the last stage and what a TP group holds whole on its other ranks are
  // replicas.
  const optim::AllSum dp_sum = dp_ ? dp_->norm_all_sum() : nullptr;
  Status norm_error;
  optim::AllSum all_sum;
  if (dp_sum || layout_.pp() > 1 || layout_.tp() > 1)
    all_sum = [&](double x) {
      if (dp_sum) x = dp_sum(x);
      for (comm::Comm* g : {groups_.tp.get(), groups_.pp.get()})
        if (g->size() > 1)
          if (Status s = g->allreduce(&x, 1); !s && norm_error) norm_error = s;
      return x;
    };
  phase(Phase::kOptimizer);
  {
    kernels::PartSpan span(kernels::StepPart::kOptimizer);
    adam_->update(all_sum);
  }
  CRUCIBLE_RETURN_IF_ERROR(norm_error);
  if (dp_) CRUCIBLE_RETURN_IF_ERROR(dp_->take_error());
  if (dp_) {
    phase(Phase::kGather);
    auto gathered = dp_->gather_parameters();
    if (!gathered) return gathered.status();
    m.comm_ms += *gathered * 1e3;
    m.comm_bytes = dp_->take_traffic_bytes() + rows_bytes;
  }
  model_->params().zero_grad();
  return Status::ok();
}


Result<double> TrainStep::evaluate(int n, const std::function<void(int, int32_t*, int32_t*)>& load) {
  auto sum = stage_->evaluate(n, load);
  if (!sum) return sum;
  if (tp_) CRUCIBLE_RETURN_IF_ERROR(tp_->error());
  return has_loss() ? *sum : 0.0;
}

}  // namespace crucible::runtime
