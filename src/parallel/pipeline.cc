#include "parallel/pipeline.h"

#include <algorithm>

#include "core/allocator.h"
#include "core/check.h"
#include "core/clock.h"
#include "core/trace.h"
#include "kernels/step_parts.h"

namespace crucible::parallel {

// One (micro-batch, chunk) in flight: its context, its arena, its sends.
struct PipelineStage::Slot {
  int micro = -1, chunk = -1;
  Arena* arena = nullptr;
  nn::Activations act;
  bool finished = false;  // its last backward pass is done
  comm::Request send_act, send_grad;
};

namespace {
enum Kind { kActivation = 0, kGradient = 1 };

Allocator& pinned_memory() {
  Allocator* pinned = Allocator::pinned();
  CRUCIBLE_CHECK(pinned, "[pipeline] a GPU's step with no pinned memory source (kernels::cuda::use_device registers it)");
  return *pinned;
}

}  // namespace

PipelineStage::PipelineStage(nn::GPT& model, comm::Comm& pp, Schedule schedule, int pp_rank, int B, int T)
    : model_(model), pp_(pp), schedule_(std::move(schedule)), rank_(pp_rank), B_(B), T_(T) {
  CRUCIBLE_CHECK(rank_ >= 0 && rank_ < schedule_.pp && pp.size() == schedule_.pp,
                 "[pipeline] the pipeline group matches the schedule");
  CRUCIBLE_CHECK(model.part().num_chunks() == schedule_.v, "[pipeline] one model chunk per virtual stage");
  actions_ = schedule_.ranks[size_t(rank_)];
  // The backward that finalises each chunk: its last B or Bw of the step.
  finalises_.assign(actions_.size(), false);
  std::vector<bool> seen(size_t(schedule_.v), false);
  for (size_t i = actions_.size(); i-- > 0;) {
    const Action& a = actions_[i];
    if ((a.op == Op::kBackward || a.op == Op::kBackwardWeight) && !seen[size_t(a.chunk)])
      seen[size_t(a.chunk)] = finalises_[i] = true;
  }
  slots_.resize(size_t(schedule_.m) * size_t(schedule_.v));
  CRUCIBLE_CHECK(2 * schedule_.pp * schedule_.v * schedule_.m < 32767, "[pipeline] message tags fit MPI's bound");
}

int PipelineStage::peak_contexts(const Schedule& s, int rank) {
  const std::vector<Action>& acts = s.ranks.at(size_t(rank));
  std::vector<int> state(size_t(s.m) * size_t(s.v), 0);  // 0 none, 1 live, 2 finished
  int live = 0, peak = 0;
  for (size_t i = 0; i < acts.size(); ++i) {  // the rules of run() below
    const Action& a = acts[i];
    int& st = state[size_t(a.micro) * size_t(s.v) + size_t(a.chunk)];
    if (st == 0) st = 1, peak = std::max(peak, ++live);
    if (a.op == Op::kBackward || a.op == Op::kBackwardWeight) st = 2;
    const bool send_follows = i + 1 < acts.size() && acts[i + 1].micro == a.micro && acts[i + 1].chunk == a.chunk &&
                              (acts[i + 1].op == Op::kSendGradient || acts[i + 1].op == Op::kSendActivation);
    if (st == 2 && !send_follows) st = 3, --live;
  }
  return peak;
}

PipelineStage::~PipelineStage() {
  (void)finish_sends(true);
  if (batch_pinned_) pinned_memory().release(batch_pinned_);
}

// A GPU's step copies its tokens from pinned memory: CUDA makes a copy from
// pageable memory first wait for everything already queued on the stream,
// which would stall the host at every micro-batch's forward (and at the
// head's targets, mid-forward) while the GPU drains, instead of queueing ahead.
int32_t* PipelineStage::step_batch(size_t ints) {
  if (model_.part().device.is_cpu()) {
    batch_host_.resize(ints);
    return batch_host_.data();
  }
  if (ints > batch_ints_) {
    if (batch_pinned_) pinned_memory().release(batch_pinned_);
    batch_pinned_ = static_cast<int32_t*>(pinned_memory().allocate(ints * sizeof(int32_t), "pipeline.batch"));
    batch_ints_ = ints;
  }
  return batch_pinned_;
}

int PipelineStage::tag(int kind, int stage, int micro) const {
  return (kind * schedule_.pp * schedule_.v + stage) * schedule_.m + micro;
}

Arena* PipelineStage::take_arena() {
  if (free_.empty()) {
    // In the memory of the model's device (its parameters'): the step's
    // activations never leave it.
    pool_.push_back(std::make_unique<Arena>("pipeline.activations", Allocator::of(model_.params().device())));
    // The largest chunk's need, so any arena serves any chunk without growing.
    size_t need = 0;
    const bool split = schedule_.kind == "zb-h1";
    for (int c = 0; c < model_.part().num_chunks(); ++c)
      need = std::max(need, nn::GPT::activation_bytes(model_.config(), model_.part(), c, B_, T_, split));
    pool_.back()->reserve(need);
    free_.push_back(pool_.back().get());
  }
  Arena* a = free_.back();
  free_.pop_back();
  a->reset();
  return a;
}

PipelineStage::Slot& PipelineStage::slot(int micro, int chunk) {
  auto& s = slots_[size_t(micro) * size_t(schedule_.v) + size_t(chunk)];
  if (!s) {
    s = std::make_unique<Slot>();
    s->micro = micro, s->chunk = chunk;
    s->arena = take_arena();
    model_.bind(s->act, *s->arena, chunk, B_, T_);
  }
  return *s;
}

// Releases the arenas of finished slots whose sends are done (all of them
// when block: the step's end).
Status PipelineStage::finish_sends(bool block) {
  Status first;
  for (auto it = draining_.begin(); it != draining_.end();) {
    Slot& s = **it;
    bool done = true;
    for (comm::Request* r : {&s.send_act, &s.send_grad}) {
      if (block) {
        Status st = r->wait();
        if (!st && first) first = st;
      } else if (!r->done() && !r->test()) {
        done = false;
      } else if (Status st = r->wait(); !st && first) {
        first = st;
      }
    }
    if (done) {
      free_.push_back(s.arena);
      it = draining_.erase(it);
    } else {
      ++it;
    }
  }
  return first;
}

Status PipelineStage::receive(void* buf, size_t bytes, int peer, int t, double* waited) {
  const int64_t t0 = now_ns();
  comm::Request r = pp_.irecv(buf, bytes, peer, t);
  Status s = r.wait();
  *waited += (now_ns() - t0) * 1e-9;
  return s;
}

double PipelineStage::load(const StepHooks& hooks) {
  const nn::GPTPart& part = model_.part();
  if (!part.embedding && !part.head) return 0;
  const int m = schedule_.m;
  const size_t BT = size_t(B_) * size_t(T_);
  int32_t* tokens = step_batch(2 * BT * size_t(m));
  int32_t* targets = tokens + BT * size_t(m);
  double data = 0;
  for (int i = 0; i < m; ++i) data += hooks.load(i, tokens + BT * size_t(i), targets + BT * size_t(i));
  return data;
}

Result<StageTimes> PipelineStage::run(float grad_scale, double* loss_sum, const StepHooks& hooks) {
  StageTimes times;
  const nn::GPTPart& part = model_.part();
  const int v = schedule_.v, pp = schedule_.pp, m = schedule_.m;
  const size_t BT = size_t(B_) * size_t(T_), NC = model_.boundary_floats(B_, T_);
  int32_t* tokens = nullptr;
  int32_t* targets = nullptr;
  if (part.embedding || part.head) {
    tokens = step_batch(2 * BT * size_t(m));  // load()'s buffer: the size is the same
    targets = tokens + BT * size_t(m);
  }
  std::vector<bool> final_done(size_t(v), false);
  auto hook_for = [&](int chunk) -> nn::GPT::GradsReady {
    if (!hooks.grads_ready) return nullptr;
    for (int c = chunk + 1; c < v; ++c)
      if (!final_done[size_t(c)]) return nullptr;  // offsets above are not final yet
    return hooks.grads_ready;
  };
  for (size_t i = 0; i < actions_.size(); ++i) {
    const Action& a = actions_[i];
    if (hooks.before) hooks.before(a);
    const int stage = stage_of(pp, rank_, a.chunk);
    const int64_t t0 = now_ns();
    Status st;
    switch (a.op) {
      case Op::kRecvActivation: {
        Slot& s = slot(a.micro, a.chunk);
        st = receive(s.act.input(), NC * sizeof(float), a.peer, tag(kActivation, stage - 1, a.micro), &times.wait);
        break;
      }
      case Op::kRecvGradient: {
        Slot& s = slot(a.micro, a.chunk);
        st = receive(s.act.output_grad(), NC * sizeof(float), a.peer, tag(kGradient, stage + 1, a.micro),
                     &times.wait);
        break;
      }
      case Op::kSendActivation: {
        Slot& s = slot(a.micro, a.chunk);
        s.send_act = pp_.isend(s.act.output(), NC * sizeof(float), a.peer, tag(kActivation, stage, a.micro));
        break;
      }
      case Op::kSendGradient: {
        Slot& s = slot(a.micro, a.chunk);
        s.send_grad = pp_.isend(s.act.input_grad(), NC * sizeof(float), a.peer, tag(kGradient, stage, a.micro));
        break;
      }
      case Op::kForward: {
        Slot& s = slot(a.micro, a.chunk);
        const size_t at = BT * size_t(a.micro);
        kernels::PartSpan span(kernels::StepPart::kForward);
        model_.forward(s.act, part.starts_model(a.chunk) ? tokens + at : nullptr,
                       part.ends_model(a.chunk) ? targets + at : nullptr, grad_scale);
        if (part.ends_model(a.chunk)) model_.add_loss(s.act, loss_sum);
        break;
      }
      case Op::kBackward:
      case Op::kBackwardInput:
      case Op::kBackwardWeight: {
        Slot& s = slot(a.micro, a.chunk);
        const nn::BackwardPass pass = a.op == Op::kBackward        ? nn::BackwardPass::kAll
                                      : a.op == Op::kBackwardInput ? nn::BackwardPass::kInput
                                                                   : nn::BackwardPass::kWeight;
        {
          kernels::PartSpan span(kernels::StepPart::kBackward);
          model_.backward(s.act, nullptr, pass, finalises_[i] ? hook_for(a.chunk) : nullptr, finalises_[i]);
        }
        if (finalises_[i]) final_done[size_t(a.chunk)] = true;
        if (a.op != Op::kBackwardInput) {
          s.finished = true;
          if (hooks.after_backward && v == 1) hooks.after_backward(a.micro);
        }
        break;
      }
    }
    // A finished (micro, chunk) drains (its arena is released once its sends
    // are done) after its last action: the generator puts a send right after
    // the compute that produced its data.
    auto& owned = slots_[size_t(a.micro) * size_t(v) + size_t(a.chunk)];
    const bool send_follows = i + 1 < actions_.size() && actions_[i + 1].micro == a.micro &&
                              actions_[i + 1].chunk == a.chunk &&
                              (actions_[i + 1].op == Op::kSendGradient || actions_[i + 1].op == Op::kSendActivation);
    if (owned && owned->finished && !send_follows) draining_.push_back(std::move(owned));
    trace::record_complete(op_name(a.op), "pipeline", t0, now_ns());  // a static string
    if (!st) return st;
    CRUCIBLE_RETURN_IF_ERROR(finish_sends(false));
  }
  for (auto& s : slots_)
    CRUCIBLE_CHECK(!s, "[pipeline] every (micro-batch, chunk) of the step finished");
  const int64_t t0 = now_ns();
  Status st = finish_sends(true);
  times.wait += (now_ns() - t0) * 1e-9;
  if (!st) return st;
  return times;
}

Result<double> PipelineStage::evaluate(int n, const std::function<void(int, int32_t*, int32_t*)>& load) {
  const nn::GPTPart& part = model_.part();
  const int pp = schedule_.pp, v = schedule_.v;
  const size_t BT = size_t(B_) * size_t(T_), NC = model_.boundary_floats(B_, T_);
  std::vector<int32_t> tokens(BT), targets(BT);
  double sum = 0, waited = 0;
  Arena* arena = take_arena();
  for (int i = 0; i < n; ++i) {
    if (part.embedding || part.head) load(i, tokens.data(), targets.data());
    // Every stage in turn: one micro-batch at a time through the pipeline
    // (validation is a small share of a run; no schedule needed).
    for (int c = 0; c < v; ++c) {
      const int stage = stage_of(pp, rank_, c);
      arena->reset();
      nn::Activations act;
      model_.bind(act, *arena, c, B_, T_);
      if (!part.starts_model(c))
        CRUCIBLE_RETURN_IF_ERROR(receive(act.input(), NC * sizeof(float), rank_of_stage(pp, stage - 1),
                                         tag(kActivation, stage - 1, 0), &waited));
      model_.forward(act, part.starts_model(c) ? tokens.data() : nullptr,
                     part.ends_model(c) ? targets.data() : nullptr, 0.0f);
      if (part.ends_model(c)) {
        sum += model_.loss(act);
      } else {
        comm::Request r = pp_.isend(act.output(), NC * sizeof(float), rank_of_stage(pp, stage + 1),
                                    tag(kActivation, stage, 0));
        CRUCIBLE_RETURN_IF_ERROR(r.wait());  // the arena is reused for the next chunk
      }
    }
  }
  free_.push_back(arena);
  return sum;
}

}  // namespace crucible::parallel
