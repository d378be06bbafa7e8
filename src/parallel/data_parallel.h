// DataParallel: gradient synchronisation for data-parallel training over a
// Comm, applied from outside the model (the model only reports, through
// GPT::backward's hook, which gradients are final).
//
// Buckets. The flat gradient buffer is cut into buckets of ~bucket_mb, from
// its end (backward finalises gradients from the end of the buffer towards 0,
// see nn/gpt.h). During the last micro-batch's backward, each bucket's
// reduction is started without blocking as soon as its gradients are final,
// and polled between layers so MPI progresses while backward computes; the
// step then waits only for what is still in flight ("exposed" communication).
// Gradients are pre-scaled by 1/(world * accum) in the loss, so the sum over
// ranks is the mean over the global batch.
//
// ZeRO. Each bucket is split into world pieces (64-byte aligned); rank r owns
// piece r of every bucket. zero = 0: allreduce, every rank updates everything.
// zero = 1: allreduce; the optimizer keeps state for its pieces only and
// updates those parameters; the parameters are then all-gathered. zero = 2:
// reduce-scatter instead of allreduce (each rank receives only its pieces'
// summed gradients: half the traffic), then update and all-gather as in 1.
// The gradient buffer itself stays whole: it accumulates micro-batches.
//
// bf16 on the wire (grad_dtype bf16, dist.grad_dtype): half the bytes. MPI
// has no bf16 sum, so a bucket goes in two phases of bits: its gradients
// are rounded to bf16 and each rank sends piece q to rank q (alltoall);
// rank q sums the W copies of its piece in f32, in rank order, rounds the
// sum once, and (zero < 2) the rounded pieces are all-gathered and widened
// back into the f32 buffer. Every rank ends with the same bits; the
// accumulation is f32 with one rounding of each operand and of the sum
// (a ring of bf16 partial sums would round W-1 times). zero = 2 keeps its
// pieces' f32 sums unrounded.
//
// Buffers are allocated once. Not thread-safe: the training thread owns it.
#pragma once
#include <utility>
#include <cstddef>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "comm/comm.h"
#include "nn/params.h"
#include "optim/adamw.h"

namespace crucible::parallel {

struct DataParallelConfig {
  double bucket_mb = 25;
  int zero = 0;
  DType grad_dtype = DType::f32;  // on the wire
};

class DataParallel {
 public:
  DataParallel(comm::Comm& comm, nn::ParamRegistry& params, const DataParallelConfig& cfg);

  // This rank's optimizer shard (every bucket's piece of this rank); empty
  // (= everything) when zero == 0.
  std::vector<optim::Range> optimizer_shard() const;
  // Sum over ranks for the optimizer's clip norm (null when zero == 0: every
  // rank then holds all reduced gradients).
  optim::AllSum norm_all_sum();
  // The first failure of a collective made inside norm_all_sum since the last
  // call (ok if none), then cleared.
  Status take_error() { return std::exchange(error_, Status::ok()); }

  // Call before the backward of the last micro-batch of a step; pass
  // on_grads_ready to GPT::backward for that micro-batch.
  void begin_reduction();
  void on_grads_ready(size_t ready_from);
  // Starts whatever has not started (e.g. backward without the hook), waits for
  // every reduction; returns the seconds this step's reduction held the
  // training thread: inside the collectives' start and poll calls during
  // backward (MPI may do much of a shared-memory reduction right there) and
  // in the final wait — the communication that was *not* hidden.
  Result<double> finish_reduction();
  // Of this step's reduction so far: the seconds spent inside communication
  // calls made from the backward hook (part of finish_reduction()'s figure).
  double seconds_in_backward() const { return held_ns_ * 1e-9; }
  // After the optimizer step (zero >= 1): all-gathers the updated parameters.
  // Returns the seconds it took (all of it is exposed).
  Result<double> gather_parameters();

  size_t num_buckets() const { return buckets_.size(); }
  // The bytes this rank put on the wire for the collectives it started since
  // the last call, by the ring algorithm's count (nccl-tests' busbw
  // convention: allreduce 2(n-1)/n x bytes, reduce-scatter and all-gather
  // (n-1)/n x bytes): what the layout moved, to check against what it implies.
  double take_traffic_bytes() {
    double t = traffic_bytes_;
    traffic_bytes_ = 0;
    return t;
  }

 private:
  struct Bucket {
    size_t begin = 0, end = 0;    // element range of the flat buffers
    std::vector<size_t> counts;   // piece sizes per rank
    std::vector<size_t> offsets;  // piece offsets (absolute) per rank
    bool started = false;
    int phase = 0;       // bf16: 1 pieces exchanged, 2 sums gathered
    size_t recv_at = 0;  // bf16: this bucket's W received pieces in recv_
    comm::Request request;
  };
  void start(Bucket& b);
  // bf16: after the exchange, sums this rank's piece and starts the gather.
  void reduce_pieces(Bucket& b);
  // Drives b to completion (bf16: both phases).
  Status wait(Bucket& b);

  comm::Comm& comm_;
  nn::ParamRegistry& params_;
  DataParallelConfig cfg_;
  std::vector<Bucket> buckets_;      // in readiness order: the end of the buffer first
  Tensor scatter_;                   // zero 2: receive buffer for this rank's pieces
  int64_t held_ns_ = 0;              // time inside communication calls this step
  std::vector<size_t> scatter_off_;  // per bucket, offset into scatter_
  Tensor wire_, recv_;               // bf16: the rounded gradients; the pieces received
  double traffic_bytes_ = 0;         // see take_traffic_bytes()
  Status error_;
};

}  // namespace crucible::parallel
