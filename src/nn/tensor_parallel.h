// The tensor-parallel group as the model's layers see it (Megatron-LM's f and
// g operators): how many ranks share each layer, which one this is, and the
// collectives over them. The parallelize step supplies it from outside
// (parallel/tensor_parallel.h builds it on a Comm), so nn links no
// communication library and knows no world.
//
// What a rank holds at tp > 1 (nn/gpt.cc registers it, nn/layers.h uses it):
//   attn.c_attn   column-parallel: the q, k and v columns of its whole heads
//   attn.c_proj   row-parallel: those heads' rows; the bias added once
//   mlp.c_fc      column-parallel: 4C/tp columns (and their bias)
//   mlp.c_proj    row-parallel: those rows; the bias added once
//   wte           vocab-parallel: rows [vocab_lo, vocab_hi), balanced when V
//                 does not divide by tp (the embedding sums the ranks'
//                 lookups; the LM head and the loss work on the rank's
//                 logits only, so no rank holds full-vocabulary logits)
//   the rest      whole on every rank (LayerNorms, wpe, the row-parallel
//                 biases), computed from identical inputs, so identical.
// One allreduce each in forward (after a row-parallel layer) and backward
// (after a column-parallel layer's input gradient).
//
// Sequence parallelism (Korthikanti et al. 2022; GPTPart::sequence_parallel):
// the LayerNorm regions (the residual stream, LayerNorms, the embedding's
// and the head's ends) hold only this rank's N/tp rows of the B*T tokens,
// rows [rank N/tp, +N/tp). Before a column-parallel layer the rows are
// all-gathered (and gathered again in backward rather than kept: the memory
// is the point); after a row-parallel layer the partial sums are
// reduce-scattered to the rows; backward swaps the two. The LayerNorms'
// gradients are then partial per rank and summed over the group once per
// step (in the backward that finalises them).
//
// Failures: a collective that fails is recorded (error()) and later calls
// return at once; the caller checks error() after the step and stops the run
// (the numbers computed meanwhile are garbage and are thrown away).
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "core/status.h"

namespace crucible::nn {

class TensorParallel {
 public:
  virtual ~TensorParallel() = default;
  virtual int size() const = 0;
  virtual int rank() const = 0;
  // x (n) := the sum over the group of every rank's x, the same bits on
  // every rank (so replicated parameters never drift apart).
  virtual void allreduce(float* x, size_t n) = 0;
  // out (size() * n) := every rank's in (n), in rank order.
  virtual void allgather(float* out, const float* in, size_t n) = 0;
  // The same for bf16 rows (sequence parallelism's gathers in bf16 models).
  virtual void allgather_bf16(bf16* out, const bf16* in, size_t n) = 0;
  // out (n) := the sum over the group of every rank's in[rank() * n, +n)
  // (in: size() * n); sequence parallelism's row-parallel output.
  virtual void reduce_scatter(float* out, const float* in, size_t n) = 0;
  virtual const Status& error() const = 0;
};

// The [lo, hi) of a dimension of `extent` that rank r of tp holds: balanced,
// the first extent % tp ranks one longer.
struct IndexRange {
  int64_t lo = 0, hi = 0;
  int64_t size() const { return hi - lo; }
};
inline IndexRange shard_range(int64_t extent, int tp, int r) {
  const int64_t base = extent / tp, extra = extent % tp;
  const int64_t lo = r * base + (r < extra ? r : extra);
  return {lo, lo + base + (r < extra ? 1 : 0)};
}

}  // namespace crucible::nn
