// nn::TensorParallel on a Comm: the collectives a tensor-parallel group's
// layers call (nn/tensor_parallel.h), over the group's sub-communicator.
//
// allreduce is an allgather followed by a sum in rank order on every rank:
// the same bits everywhere whatever algorithm MPI picks (so the parameters
// every rank holds whole stay equal without ever being synchronised), and at
// tp = 2 the same traffic as a ring allreduce. Larger groups pay (tp - 1) n
// received instead of 2 (tp - 1)/tp n; TP groups stay inside one host.
// Not thread-safe (the training thread calls it, MPI_THREAD_FUNNELED).
#pragma once
#include <vector>

#include "comm/comm.h"
#include "core/tensor.h"
#include "nn/tensor_parallel.h"

namespace crucible::parallel {

class CommTensorParallel final : public nn::TensorParallel {
 public:
  explicit CommTensorParallel(comm::Comm& group) : group_(group) {}
  int size() const override { return group_.size(); }
  int rank() const override { return group_.rank(); }
  void allreduce(float* x, size_t n) override;
  void allgather(float* out, const float* in, size_t n) override;
  void allgather_bf16(bf16* out, const bf16* in, size_t n) override;
  void reduce_scatter(float* out, const float* in, size_t n) override;
  const Status& error() const override { return error_; }
  // Seconds spent in the group's collectives since the last take (the
  // exposed tensor-parallel communication: nothing overlaps it).
  double take_seconds();

 private:
  comm::Comm& group_;
  Tensor gathered_;  // allreduce's staging on the activations' device, reused
  Status error_;
  double seconds_ = 0;
};

}  // namespace crucible::parallel
