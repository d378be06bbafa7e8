// EmbeddingGradRows: the tied wte's embedding gradient reduced apart from its
// LM-head gradient, for data parallelism within one pipeline stage (pp = 1).
//
// Why. wte is the largest tensor (31% of gpt2-124M's parameters) and both
// the head (first in backward: dense, final right after the head) and the
// embedding (last in backward: one row per token) add to its gradient, so
// reduced as one tensor its buckets could start only when backward ends.
// With GPTPart::embedding_rows the head's dense gradient goes through the
// overlapped bucket reduction as soon as the head is done, and the
// embedding's rows land here: each rank's accum x B x T rows (C floats and
// the token), all-gathered over the data-parallel group after the
// reduction and added into the reduced wte gradient on every rank, in rank
// order and then row order, so every rank gets the same bits.
//
// It pays while the rows are fewer bytes than the dense tensor: worth() is
// the rule TrainStep applies. The reproducible tree keeps the tensor whole
// (its sums are of whole micro-batch gradients). The buffers live beside the
// gradients (the run's device, crucible's allocator) and the rows are added
// by the embedding's own backward kernel, one rank's block after another:
// the same order, so the same bits, on either device. Not thread-safe.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "comm/comm.h"
#include "core/status.h"
#include "core/tensor.h"
#include "nn/gpt.h"
#include "nn/layers.h"
#include "nn/tensor_parallel.h"
#include "parallel/layout.h"

namespace crucible::parallel {

class EmbeddingGradRows {
 public:
  // rows: this rank's rows per step (accum x B x T); C: the model width;
  // device: the gradients'.
  EmbeddingGradRows(comm::Comm& dp, size_t rows, int C, Device device);

  // True when all-gathering `rows` rows a rank over `ranks` ranks moves
  // fewer bytes than the ring allreduce of the dense (vocab, C) gradient.
  static bool worth(int ranks, size_t rows, int64_t vocab, int C);
  // Whether a layout's ranks reduce wte this way (with overlap on and no
  // reproducible tree): data parallel, one pipeline stage, worth() for its
  // rows (accum x B x T) and this rank's vocabulary share.
  static bool applies(const Layout& layout, const nn::GPTConfig& model, int accum, int B);
  // One rank's block of rows (its tokens, then its rows); the buffers are
  // this rank's block and every rank's (ranks blocks).
  static uint64_t block_bytes(size_t rows, int C);

  // The buffer the model's embedding backward appends to (GPT::set_embedding_rows).
  nn::EmbeddingRows* sink() { return &sink_; }
  // Every rank's rows of this step added into wte_grad (the rows of `vocab`
  // this rank holds), then the buffer emptied for the next step. Call after
  // the dense gradient's reduction. Collective over the group. Returns the
  // seconds it took (all of it exposed); traffic_bytes: what it put on the
  // wire (the ring's (n-1)/n of the gathered bytes).
  Result<double> add_all(float* wte_grad, nn::IndexRange vocab, double& traffic_bytes);

 private:
  comm::Comm& comm_;
  int C_;
  size_t capacity_;
  size_t block_bytes_;  // one rank's block: capacity int32 tokens, then capacity x C floats
  Tensor mine_;         // this rank's block, the sink's storage
  Tensor all_;          // every rank's block, gathered
  nn::EmbeddingRows sink_;
};

}  // namespace crucible::parallel
