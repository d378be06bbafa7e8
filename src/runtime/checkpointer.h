// Checkpointer: a run's saves, driven from the training thread at step
// boundaries, each written on a background thread (ckpt/async_writer.h) from
// a host snapshot. Without model parallelism or ZeRO rank 0 writes the whole
// model. Otherwise the checkpoint is written by several ranks at once
// (ckpt/checkpoint.h): the first data-parallel rank of every part (a
// pipeline stage's tensor-parallel shard) its part's weights, and its
// moments or, under ZeRO, every rank its shard of them; rank 0 publishes
// the checkpoint once every writer has written. No rank holds more than its
// own part and shard. Either way a checkpoint of any layout resumes at any
// other.
//
// Failures: a background write that fails waits in error() until the job
// agrees on it at the next collect(), so a failed save stops the run within a
// step. Not thread-safe: the training thread owns it.
#pragma once
#include <atomic>
#include <memory>
#include <vector>
#include <string>

#include "ckpt/async_writer.h"
#include "ckpt/checkpoint.h"
#include "core/status.h"
#include "comm/comm.h"
#include "runtime/metrics.h"
#include "runtime/train_step.h"

namespace crucible::runtime {

class Checkpointer {
 public:
  Checkpointer(comm::Comm& world, TrainStep& step, const Config& cfg, const std::string& ckpt_dir);
  ~Checkpointer();

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
  comm::Comm& world_;
  TrainStep& step_;
  const Config& cfg_;
  const std::string ckpt_dir_;
  bool sharded_ = false;     // pp or tp > 1: every part writes its own files
  bool collective_ = false;  // several ranks write each checkpoint (sharded or ZeRO)
  bool weights_ = false;     // this rank writes weights (data-parallel index 0)
  std::atomic<bool> cancelled_{false};  // the publisher stops waiting for the other writers
  std::unique_ptr<ckpt::AsyncCheckpointWriter> writer_;  // on the ranks that write
  Status error_;
};

}  // namespace crucible::runtime
