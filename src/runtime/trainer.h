// The training loop (torchtitan's shape: load checkpoint -> loop {step, eval,
// save} -> samples). Composes the data loader, the GPT, AdamW and checkpoints
// for one process; the data-parallel issue adds ranks around it.
//
// Per step it writes one JSON object to RUN/metrics.jsonl (docs/training.md, "metrics.jsonl"):
// step, loss, lr, grad_norm, tokens/s, MFU, the step's time split into data
// wait / forward / backward / optimizer, allocator memory, and val_loss on
// evaluation steps. Checkpoints go to RUN/ckpt every ckpt.every steps and at
// the end; SIGINT/SIGTERM checkpoint at the next step boundary and stop.
#pragma once
#include <cstdint>
#include <string>

#include "core/status.h"
#include "runtime/console.h"
#include "runtime/run_dir.h"

namespace crucible::runtime {

// Exit codes of `crucible train` beyond 0 / 1 (failure) / 2 (bad input).
inline constexpr int kExitPreempted = 3;  // stopped by a signal after checkpointing

struct TrainOptions {
  int64_t stop_at = 0;  // > 0: checkpoint and stop after this many steps (resumable)
  int metrics_port = 0;  // > 0: serve live metrics for Prometheus on port + rank
  std::string metrics_bind = "127.0.0.1";  // the address it listens on
};

struct TrainResult {
  std::string run_dir;
  int64_t steps_done = 0;
  bool stopped_early = false;  // --stop-at or a signal
  bool preempted = false;      // a signal
  bool already_finished = false;  // --resume of a run at train.steps: nothing was done
  bool reporter = true;        // this process prints the job's messages (rank 0)
  double last_loss = 0, val_loss = 0, unigram_entropy = 0;
  // A fine-tuning run (init.from): the validation loss before its first step
  // (< 0: not a fine-tuning run).
  double val_loss_before = -1;
};

Result<TrainResult> train(const RunPlan& plan, const TrainOptions& opt, Console& console);

}  // namespace crucible::runtime
