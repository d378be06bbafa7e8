// PipelineStage: one pipeline rank's part of a training step, replayed from
// its list of a Schedule (parallel/schedule.h) that check_schedule proved
// sound: the forwards and backwards of its model chunks, and the activations
// and gradients exchanged with the neighbouring stages over the pipeline
// group. Data parallelism alone is the trivial schedule (pp = 1: forward,
// backward, per micro-batch, no communication), so this is the training
// loop's one micro-batch loop.
//
// Micro-batches in flight. Each (micro-batch, chunk) forward gets its own
// Activations on its own arena from a pool (arenas are reset and reused; the
// pool grows to the schedule's peak in flight, then stays), released once its
// backward is done and the sends from its buffers have finished.
//
// Communication, with the checker's semantics: a send is an isend from the
// context's own buffer (the output residual, the input gradient), which
// stays alive until the send finishes; a receive is an irecv into the
// context (its input, its output gradient) waited at once. Messages are told
// apart by tag (kind, the sender's stage, micro-batch), as the checker
// matches them. Time blocked in receives is the rank's bubble as it saw it
// (with the neighbours' compute it waited for).
//
// Not thread-safe: the training thread owns it.
#pragma once
#include <functional>
#include <memory>
#include <vector>

#include "core/allocator.h"
#include "core/status.h"
#include "comm/comm.h"
#include "nn/gpt.h"
#include "parallel/schedule.h"

namespace crucible::parallel {

// What a step on this rank waited, in seconds. (Loading its micro-batches is
// load()'s return; its forward and backward actions are the step's
// kernels/step_parts.h parts, timed on the device that runs them.)
struct StageTimes {
  double wait = 0;  // blocked in receives and in the step's final send waits
};

struct StepHooks {
  // Fills micro-batch `micro`'s (B,T) tokens and targets; returns the seconds
  // it waited for data. Called for micro = 0 .. m-1 in order, at the step's
  // start, on ranks that hold the embedding or the head.
  std::function<double(int micro, int32_t* tokens, int32_t* targets)> load;
  // Before each action (phase markers, fault injection).
  std::function<void(const Action&)> before;
  // After each micro-batch's backward on a rank with one chunk (the
  // reproducible tree's quantum).
  std::function<void(int micro)> after_backward;
  // Gradient readiness (nn::GPT::GradsReady), passed to the backwards that
  // finalise a chunk's gradients, in the order that keeps its offsets
  // descending (a chunk reports only when every chunk above it is final).
  nn::GPT::GradsReady grads_ready;
};

class PipelineStage {
 public:
  // pp_rank: this rank in the pipeline group `pp` (its list of the schedule).
  // The schedule must have passed check_schedule. B x T tokens per micro-batch.
  PipelineStage(nn::GPT& model, comm::Comm& pp, Schedule schedule, int pp_rank, int B, int T);
  ~PipelineStage();

  // One step in two halves. load: the host's, the micro-batches (StepHooks::
  // load) into the step's batch buffer, at the same address every step;
  // returns the seconds spent waiting for data. run: every action of this
  // rank's list, what a captured graph of the step records
  // (kernels/step_graph.h). grad_scale as in nn::GPT::forward. On the stage
  // that ends the model each micro-batch's mean loss is added to *loss_sum, a
  // double in the model's device memory (nn::GPT::add_loss: nothing read
  // back). A failed send or receive (a neighbour gone) is the Status; the
  // step is then lost (the caller stops).
  double load(const StepHooks& hooks);
  Result<StageTimes> run(float grad_scale, double* loss_sum, const StepHooks& hooks);
  // Forward only, for validation: micro-batch i's tokens/targets from
  // load(i, ...) on the first and last stage; every stage forwards each in
  // turn. Returns the sum of the micro-batches' mean losses on the stage that
  // ends the model (0 elsewhere).
  Result<double> evaluate(int n, const std::function<void(int, int32_t*, int32_t*)>& load);

  const Schedule& schedule() const { return schedule_; }
  // The most (micro-batch, chunk) contexts pipeline rank `rank` holds at once
  // under `s` (sends finishing at once): the arenas its pool grows to, but for
  // sends still in flight when the next context is needed.
  static int peak_contexts(const Schedule& s, int rank);
  // Arenas the pool holds (its peak in flight so far).
  size_t arenas() const { return pool_.size(); }

 private:
  struct Slot;
  Slot& slot(int micro, int chunk);
  Arena* take_arena();  // from the pool, reset; each reserved for the largest chunk
  Status finish_sends(bool block);
  Status receive(void* buf, size_t bytes, int peer, int tag, double* waited);
  int tag(int kind, int stage, int micro) const;

  nn::GPT& model_;
  comm::Comm& pp_;
  Schedule schedule_;
  const int rank_, B_, T_;
  std::vector<Action> actions_;
  std::vector<bool> finalises_;  // per action: the last backward of its chunk this step
  std::vector<std::unique_ptr<Arena>> pool_;
  std::vector<Arena*> free_;
  std::vector<std::unique_ptr<Slot>> slots_;  // (micro, chunk) in flight, by micro * v + chunk
  std::vector<std::unique_ptr<Slot>> draining_;  // backward done, sends in flight
  // The step's micro-batches (every micro-batch's tokens, then their
  // targets), on the host: each forward copies its own from here.
  int32_t* step_batch(size_t ints);
  std::vector<int32_t> batch_host_;  // on the CPU
  int32_t* batch_pinned_ = nullptr;  // on a GPU: pinned (batch_ints_ of them)
  size_t batch_ints_ = 0;
};

}  // namespace crucible::parallel
