// Reproducible gradient reduction (dist.reproducible): the same bits for any
// world size at the same global batch.
//
// A floating-point sum depends on its order, and data parallelism changes the
// order: who sums which micro-batch, in which sequence, over which ring. Here
// the order is fixed by the data, not by the layout. A global step has Q
// micro-batch gradient "quanta" g = m * W + r (micro-batch m of rank r: the
// loader gives quantum g the same samples for every W). They are summed in one
// fixed binary tree over g in which quantum g is first paired with g + Q/2,
// then with g + Q/4, ..., finally g + 1 (a bit-reversed tree). With rank r
// holding quanta r, r + W, r + 2W, ..., the first log2(Q/W) levels pair
// quanta of the same rank (offsets Q/2 .. W are multiples of W) and the last
// log2(W) levels pair ranks r and r + W/2, then r + W/4, ... 1. So:
//   - locally, a rank computes each quantum's gradient on its own (not
//     accumulated) and folds them with a binary counter, visiting its
//     micro-batches in bit-reversed order (m with m + A/2 first);
//   - across ranks, recursive halving: at distance d = W/2, W/4, .., 1 each
//     rank exchanges its whole sum with rank r XOR d and adds (a + b == b + a
//     exactly in IEEE arithmetic, so both partners hold the same bits).
// Costs (docs/performance.md): log2(W) whole-buffer exchanges instead of a
// ring allreduce's 2(W-1)/W, no overlap with backward, log2(A)+1 extra
// gradient buffers. Requires W and grad_accum to be powers of two, ZeRO 0 and
// the same threads per rank (kernels are deterministic for a given thread
// count, not across thread counts). Not thread-safe.
#pragma once
#include <cstdint>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "comm/comm.h"
#include "nn/params.h"

namespace crucible::parallel {

// Position i (0..n-1) of the bit-reversed visiting order of n = 2^k items.
int bit_reversed(int i, int n);

class TreeReducer {
 public:
  TreeReducer(comm::Comm& comm, nn::ParamRegistry& params, int accum);
  // After the backward of each micro-batch, in bit_reversed order: folds the
  // gradient buffer into the local tree and zeroes it for the next one.
  void add_quantum();
  // After the last micro-batch: leaves the global sum in the gradient buffer
  // of every rank. Returns seconds spent communicating.
  Result<double> finish();

 private:
  comm::Comm& comm_;
  nn::ParamRegistry& params_;
  int accum_;
  std::vector<Tensor> buffers_;             // log2(accum) + 1 partial sums
  std::vector<std::pair<int, int>> stack_;  // (level, buffer index)
  Tensor recv_;
};

}  // namespace crucible::parallel
