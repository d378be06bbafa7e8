// fault.inject: a test facility (docs/fault_tolerance.md, "Fault injection")
// that makes a run fail in a chosen way at a chosen step, so tests exercise
// the recovery paths with real processes and files. Entries are
// "KIND@STEP[:key=value]...":
//   kill@STEP[:rank=R]              rank R (default 0) kills itself with
//                                   SIGKILL in the backward pass of step STEP;
//   kill_after_ckpt@STEP[:rank=R]   rank R kills itself with SIGKILL as soon as
//                                   the checkpoint of STEP is on disk, before
//                                   anything else of the step is written (its
//                                   metrics row): the window a crash may hit;
//   hang@STEP[:rank=R]              rank R stops making progress in the
//                                   forward pass of step STEP (sleeps forever);
//   slow@STEP[:rank=R][:ms=M]       from step STEP on, rank R sleeps M ms
//                                   (default 100) before every forward pass:
//                                   a straggler, or time to interrupt a run;
//   leak@STEP[:rank=R][:kb=K]       from step STEP on, rank R allocates K KiB
//                                   (default 64) from crucible's allocator in
//                                   every step and never frees them (tag
//                                   "fault.leak"): what the leak check must see;
//   ckpt_write_error@STEP[:file=F]  the checkpoint of STEP fails while writing
//                                   F (default optimizer.safetensors), as a
//                                   full disk would;
//   ckpt_corrupt@STEP[:file=F]      once the checkpoint of STEP is published, one
//                                   byte of F (default model.safetensors) flips.
// Every entry takes `attempt=N` (default 0) or `attempt=all`: under
// `crucible launch` a fault fires only in that attempt of the job (the
// supervisor numbers its relaunches), so a restarted job does not meet the
// same fault again unless asked to.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "runtime/config.h"

namespace crucible::runtime {

struct InjectedFault {
  enum class Kind { kKill, kKillAfterCkpt, kHang, kSlow, kLeak, kCkptWriteError, kCkptCorrupt };
  Kind kind = Kind::kKill;
  int64_t step = 0;
  int rank = 0;
  std::string file;
  int attempt = 0;  // -1: every attempt
  int ms = 100;     // slow
  int kb = 64;      // leak
};

Result<std::vector<InjectedFault>> parse_faults(const FaultConfig& cfg);

// This process's attempt number: CRUCIBLE_ATTEMPT as set by the supervisor, 0
// when unsupervised.
int current_attempt();

// The faults of one rank of one attempt. The checkpoint faults are armed in
// ckpt/ (rank 0 writes checkpoints); kill and hang fire from the step loop.
class FaultInjector {
 public:
  // Parses and keeps the entries for (rank, current_attempt()); arms the
  // checkpoint faults on rank 0. An unknown entry is an error naming it.
  Status arm(const FaultConfig& cfg, int rank);
  // Whether any fault is armed for this rank and attempt (a step with one is
  // never replayed from a CUDA graph: they fire from host hooks).
  bool armed() const { return !mine_.empty(); }
  // Called at the start of the forward pass of step `step` (1-based).
  void before_forward(int64_t step) const;
  // Called at the start of the backward pass of step `step`.
  void before_backward(int64_t step) const;
  // kill_after_ckpt: step `step` must checkpoint (synchronously), and
  // after_checkpoint(step) then kills this process.
  bool kills_after_checkpoint(int64_t step) const;
  void after_checkpoint(int64_t step) const;

 private:
  std::vector<InjectedFault> mine_;
  mutable std::vector<void*> leaked_;  // leak: kept, never freed
};

}  // namespace crucible::runtime
