#include "runtime/checkpointer.h"

#include <cstring>

#include "core/check.h"
#include "core/clock.h"
#include "runtime/world.h"

namespace crucible::runtime {

namespace {
// Places a part's flat buffers (specs' layout) into the whole model's, by
// name, each tensor-parallel shard into its place in the whole tensor.
void place(const std::vector<nn::ParamSpec>& from_specs, const float* const from[3],
           const std::vector<nn::ParamSpec>& to_specs, float* const to[3]) {
  for (const nn::ParamSpec& s : from_specs) {
    if (s.replica) continue;  // another part's copy is the one saved
    const nn::ParamSpec* t = nullptr;
    for (const nn::ParamSpec& c : to_specs)
      if (c.name == s.name) t = &c;
    CRUCIBLE_CHECK(t && t->shape == s.whole_shape, "[ckpt] a part's tensor is (part of) the whole model's");
    for (int k = 0; k < 3; ++k) nn::copy_to_whole(s, from[k] + s.offset, to[k] + t->offset);
  }
}
}  // namespace

Checkpointer::Checkpointer(dist::Comm& world, TrainStep& step, const Config& cfg, const std::string& ckpt_dir)
    : world_(world), step_(step), cfg_(cfg) {
  const bool parts = step.layout().pp() > 1 || step.layout().tp() > 1;  // parts of the model
  const bool zero = step.data_parallel() && cfg.dist.zero > 0;
  const size_t own = step.model().params().numel();
  if (world.rank() == 0) writer_ = std::make_unique<ckpt::AsyncCheckpointWriter>(ckpt_dir, cfg.ckpt.keep);
  // Fault the snapshots' pages in now (zero-filled by resize), not in the
  // first checkpoint's stall: ~14 us per fresh 4 KiB page on these VMs.
  if (writer_) {
    const size_t whole = parts ? nn::GPT::flat_params(cfg.model) : own;
    for (auto* v : {&writer_->buffer().params, &writer_->buffer().exp_avg, &writer_->buffer().exp_avg_sq})
      v->resize(whole);
  }
  const bool needs_part = parts ? (step.coords().dp == 0 || zero) : (zero && !writer_);
  if (needs_part)
    for (auto* v : {&part_.params, &part_.exp_avg, &part_.exp_avg_sq}) v->resize(own);
}

void Checkpointer::reap(bool block, StepMetrics* m) {
  if (!writer_ || (!block && writer_->busy())) return;
  ckpt::AsyncCheckpointWriter::Outcome o = writer_->wait();
  if (m) m->ckpt_wait_ms += o.waited_s * 1e3;
  if (!o.had_save) return;
  if (m) m->ckpt_write_ms = o.write_s * 1e3;
  if (!o.status && error_) error_ = o.status;
}

Status Checkpointer::collect(StepMetrics* m) {
  reap(true, m);
  return agree(world_, error_);
}

Status Checkpointer::gather_parts(ckpt::Snapshot& full, const ckpt::Snapshot& own) {
  const parallel::Layout& L = step_.layout();
  const bool leader = step_.coords().dp == 0;
  const int tag = 7001;  // three messages per part (weights, both moments), in rank order
  if (world_.rank() == 0) {
    full.specs = nn::GPT::param_specs(cfg_.model, nn::GPTPart::whole(cfg_.model));
    float* const to[3] = {full.params.data(), full.exp_avg.data(), full.exp_avg_sq.data()};
    const float* const mine[3] = {own.params.data(), own.exp_avg.data(), own.exp_avg_sq.data()};
    place(own.specs, mine, full.specs, to);
    std::vector<float> buf;
    for (int src = 1; src < L.pp() * L.tp(); ++src) {  // the ranks of data-parallel index 0
      const nn::GPTPart part = stage_part(L, L.coords(src), cfg_.model);
      const size_t n = nn::GPT::flat_params(cfg_.model, part);
      buf.resize(3 * n);
      for (int k = 0; k < 3; ++k)
        CRUCIBLE_RETURN_IF_ERROR(world_.recv(buf.data() + size_t(k) * n, n * sizeof(float), src, tag + k));
      const float* const from[3] = {buf.data(), buf.data() + n, buf.data() + 2 * n};
      place(nn::GPT::param_specs(cfg_.model, part), from, full.specs, to);
    }
  } else if (leader) {
    int k = 0;  // straight from the snapshot: no staging copy
    for (const std::vector<float>* v : {&own.params, &own.exp_avg, &own.exp_avg_sq})
      CRUCIBLE_RETURN_IF_ERROR(world_.send(v->data(), v->size() * sizeof(float), 0, tag + k++));
  }
  return Status::ok();
}

Status Checkpointer::save(const ckpt::CheckpointState& state, bool flush, StepMetrics& m) {
  Stopwatch sw;
  CRUCIBLE_RETURN_IF_ERROR(collect(&m));
  dist::DataParallel* dp = step_.data_parallel();
  const bool zero = dp && cfg_.dist.zero > 0;
  const bool parts = step_.layout().pp() > 1 || step_.layout().tp() > 1;  // parts of the model
  nn::ParamRegistry& params = step_.model().params();
  // This rank's part: the writer's buffer itself without a parts.
  ckpt::Snapshot* own = writer_ && !parts ? &writer_->buffer() : (part_.params.empty() ? nullptr : &part_);
  if (own) {
    ckpt::take_snapshot(state, params, step_.optimizer(), *own);  // reuses its buffers
    if (zero) CRUCIBLE_RETURN_IF_ERROR(dp->gather_moments(own->exp_avg.data(), own->exp_avg_sq.data()));
  }
  if (parts) {
    if (writer_) {
      writer_->buffer().state = state;
      writer_->buffer().adam_steps = step_.optimizer().steps_taken();
    }
    CRUCIBLE_RETURN_IF_ERROR(agree(world_, gather_parts(writer_ ? writer_->buffer() : part_, own ? *own : part_)));
  }
  if (writer_) writer_->start();
  m.ckpt_stall_ms = sw.elapsed_ms();
  if (flush) {  // the run ends here: the checkpoint must be on disk first
    Stopwatch fw;
    CRUCIBLE_RETURN_IF_ERROR(collect(nullptr));
    m.ckpt_flush_ms = fw.elapsed_ms();
  }
  return Status::ok();
}

}  // namespace crucible::runtime
