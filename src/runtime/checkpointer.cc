#include "runtime/checkpointer.h"

#include <algorithm>

#include "core/check.h"
#include "core/clock.h"
#include "runtime/world.h"

namespace crucible::runtime {

Checkpointer::Checkpointer(comm::Comm& world, TrainStep& step, const Config& cfg, const std::string& ckpt_dir)
    : world_(world), step_(step), cfg_(cfg), ckpt_dir_(ckpt_dir) {
  const parallel::Layout& L = step.layout();
  const int parts = L.pp() * L.tp();
  sharded_ = parts > 1;
  const bool zero = step.data_parallel() && cfg.dist.zero > 0 && L.dp() > 1;
  // Who writes: one rank (rank 0, the whole model); every part's first
  // data-parallel rank, ranks 0 .. parts - 1 (dp is the slowest coordinate);
  // or under ZeRO every rank, each its moments' shard, the first
  // data-parallel ranks their part's weights too. Rank 0 publishes.
  const int writers = zero ? world.size() : sharded_ ? parts : 1;
  collective_ = writers > 1;
  weights_ = step.coords().dp == 0;
  if (world.rank() >= writers) return;
  if (collective_ && world.rank() == 0)
    writer_ = std::make_unique<ckpt::AsyncCheckpointWriter>(
        ckpt_dir, cfg.ckpt.keep, [this](const std::string& dir, const ckpt::Snapshot& snap, int keep) {
          return ckpt::publish_sharded_checkpoint(dir, snap, keep, [this] { return cancelled_.load(); });
        });
  else
    writer_ = std::make_unique<ckpt::AsyncCheckpointWriter>(ckpt_dir, cfg.ckpt.keep);
  ckpt::Snapshot& snap = writer_->buffer();  // take_snapshot leaves these alone
  snap.part = sharded_ ? world.rank() % parts : -1;
  snap.moment_shard = zero ? step.coords().dp : -1;
  snap.writer = collective_ ? world.rank() : -1;
  snap.writers = writers;
  // Fault the snapshot's pages in now (zero-filled by resize), not in the
  // first checkpoint's stall: ~14 us per fresh 4 KiB page on these VMs.
  if (weights_) snap.params.resize(step.model().params().numel());
  for (auto* v : {&snap.exp_avg, &snap.exp_avg_sq}) v->resize(step.optimizer().shard_numel());
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
  if (writer_) {
    ckpt::Snapshot& own = writer_->buffer();
    ckpt::take_snapshot(state, step_.model().params(), step_.optimizer(), own, weights_);  // reuses its buffers
    if (sharded_)  // a part's own tensors (its replicas are another part's)
      std::erase_if(own.specs, [](const nn::ParamSpec& s) { return s.replica; });
  }
  // Rank 0 opens the checkpoint's directory before any other rank writes into it.
  if (collective_)
    CRUCIBLE_RETURN_IF_ERROR(agree(
        world_, world_.rank() == 0 ? ckpt::begin_sharded_checkpoint(ckpt_dir_, state.step) : Status::ok()));
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
