// Checkpointer: a run's saves, driven from the training thread at step
// boundaries. Rank 0 writes each save on a background thread
// (ckpt/async_writer.h) from one host snapshot in the whole model's layout,
// so a checkpoint of any layout resumes at any other. The other ranks add
// what only they hold: ZeRO's moment shards (gathered in each data-parallel
// group) and, under pipeline or tensor parallelism, their part's parameters
// and moments (each part's first data-parallel rank sends it to rank 0,
// which places it by name, each tensor-parallel shard where it lies in the
// whole tensor: nn::copy_to_whole). That gather is the interim step of issue 16: the
// sharded checkpoint (every rank writes its own slices) replaces it.
//
// Failures: a background write that fails waits in error() until the job
// agrees on it at the next collect(), so a failed save stops the run within a
// step. Not thread-safe: the training thread owns it.
#pragma once
#include <memory>
#include <string>

#include "ckpt/async_writer.h"
#include "ckpt/checkpoint.h"
#include "core/status.h"
#include "dist/comm.h"
#include "runtime/metrics.h"
#include "runtime/train_step.h"

namespace crucible::runtime {

class Checkpointer {
 public:
  Checkpointer(dist::Comm& world, TrainStep& step, const Config& cfg, const std::string& ckpt_dir);

  // Rank 0 reaps a finished save (block: waits for the one in flight),
  // recording its timings in m when given. Not collective.
  void reap(bool block, StepMetrics* m);
  // Every rank learns how the saves so far ended (a collective).
  Status collect(StepMetrics* m);
  // The first failed save not yet agreed on (rank 0), else ok.
  const Status& error() const { return error_; }
  // Snapshots the step's state and starts its write; flush: waits until it
  // is on disk (the run ends here). Collective.
  Status save(const ckpt::CheckpointState& state, bool flush, StepMetrics& m);

 private:
  // Rank 0's full-layout snapshot gets every other part (pp or tp > 1).
  Status gather_parts(ckpt::Snapshot& full, const ckpt::Snapshot& own);

  dist::Comm& world_;
  TrainStep& step_;
  const Config& cfg_;
  std::unique_ptr<ckpt::AsyncCheckpointWriter> writer_;  // rank 0
  ckpt::Snapshot part_;  // this rank's part, when it is not rank 0's whole snapshot
  Status error_;
};

}  // namespace crucible::runtime
