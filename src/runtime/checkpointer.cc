#include "runtime/checkpointer.h"

#include <algorithm>

#include "core/check.h"
#include "core/clock.h"
#include "runtime/world.h"

namespace crucible::runtime {

Checkpointer::Checkpointer(comm::Comm& world, TrainStep& step, const Config& cfg, const std::string& ckpt_dir)
    : world_(world), step_(step), cfg_(cfg), ckpt_dir_(ckpt_dir) {
  const parallel::Layout& L = step.layout();
  sharded_ = L.pp() > 1 || L.tp() > 1;
  const bool zero = step.data_parallel() && cfg.dist.zero > 0;
  const size_t own = step.model().params().numel();
  // The writers: rank 0 alone without model parallelism; else the first
  // data-parallel rank of every part, rank 0 publishing.
  if (world.rank() == 0 && sharded_)
    writer_ = std::make_unique<ckpt::AsyncCheckpointWriter>(
        ckpt_dir, cfg.ckpt.keep, [this](const std::string& dir, const ckpt::Snapshot& snap, int keep) {
          return ckpt::publish_sharded_checkpoint(dir, snap, keep, [this] { return cancelled_.load(); });
        });
  else if (world.rank() == 0 || (sharded_ && step.coords().dp == 0))
    writer_ = std::make_unique<ckpt::AsyncCheckpointWriter>(ckpt_dir, cfg.ckpt.keep);
  // Fault the snapshots' pages in now (zero-filled by resize), not in the
  // first checkpoint's stall: ~14 us per fresh 4 KiB page on these VMs.
  for (ckpt::Snapshot* s : {writer_ ? &writer_->buffer() : nullptr, zero && !writer_ ? &part_ : nullptr})
    if (s)
      for (auto* v : {&s->params, &s->exp_avg, &s->exp_avg_sq}) v->resize(own);
  // Which part the writer's snapshots are (take_snapshot leaves these alone),
  // and for the publisher every part's tensors, for the manifest.
  if (sharded_ && writer_) {
    writer_->buffer().part = world.rank();
    if (world.rank() == 0)
      for (int k = 0; k < L.pp() * L.tp(); ++k)
        writer_->buffer().parts.push_back(nn::GPT::param_specs(cfg.model, parallel::stage_part(L, L.coords(k), cfg.model)));
  }
}

Checkpointer::~Checkpointer() { cancelled_ = true; }  // before the writer's destructor waits

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

Status Checkpointer::save(const ckpt::CheckpointState& state, bool flush, StepMetrics& m) {
  Stopwatch sw;
  CRUCIBLE_RETURN_IF_ERROR(collect(&m));
  parallel::DataParallel* dp = step_.data_parallel();
  const bool zero = dp && cfg_.dist.zero > 0;
  nn::ParamRegistry& params = step_.model().params();
  // This rank's snapshot: its writer's buffer, or under ZeRO the buffer it
  // gathers its data-parallel group's moment shards with.
  ckpt::Snapshot* own = writer_ ? &writer_->buffer() : (zero ? &part_ : nullptr);
  if (own) {
    ckpt::take_snapshot(state, params, step_.optimizer(), *own);  // reuses its buffers
    if (zero) CRUCIBLE_RETURN_IF_ERROR(dp->gather_moments(own->exp_avg.data(), own->exp_avg_sq.data()));
  }
  if (sharded_) {
    if (writer_)  // a part's own tensors (its replicas are another part's)
      std::erase_if(own->specs, [](const nn::ParamSpec& s) { return s.replica; });
    // Rank 0 opens the checkpoint's directory before any part writes into it.
    CRUCIBLE_RETURN_IF_ERROR(agree(
        world_, world_.rank() == 0 ? ckpt::begin_sharded_checkpoint(ckpt_dir_, state.step) : Status::ok()));
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
