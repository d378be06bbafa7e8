// The LM head's loss when the vocabulary is split over a tensor-parallel
// group (nn/tensor_parallel.h): how it combines the ranks' shards is in
// cross_entropy.cc.
#pragma once
#include <cstdint>

#include "core/allocator.h"
#include "core/dtype.h"
#include "nn/tensor_parallel.h"

namespace crucible::nn {

// losses (N) := the cross-entropy of each row over the whole vocabulary,
// from this rank's logits (N, vocab.size()): columns [vocab.lo, vocab.hi).
// targets (N): whole-vocabulary ids (< 0: ignored, loss 0). dscale != 0:
// logits := the gradient of its columns, (softmax - onehot) * dscale.
// logits of type logits_type (f32 or bf16; the statistics are f32 either way).
// Collective over tp; scratch from the arena (kept until its reset).
void vocab_parallel_cross_entropy(Arena& arena, TensorParallel& tp, IndexRange vocab, float* losses,
                                  void* logits, DType logits_type, const int32_t* targets, int N,
                                  float dscale);

}  // namespace crucible::nn
