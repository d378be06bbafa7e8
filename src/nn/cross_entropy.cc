// Vocabulary-parallel softmax + cross-entropy (Megatron-LM's
// vocab_parallel_cross_entropy, with one exchange instead of three): each
// rank holds the logits of its rows of wte, columns [vocab.lo, vocab.hi) of
// the (N,V) logits, and no rank ever forms the full-vocabulary row.
//
//   1. each rank: its rows' (max, log sum exp) and the target's logit where
//      it holds the target (0 elsewhere)                        (N) x 3
//   2. one allgather of those 3N floats over the group
//   3. every rank combines them in rank order (so every rank has the same
//      bits): M = max_r m_r, log S = log sum_r exp(ls_r + m_r - M), the
//      target's logit = the sum of the ranks' (one is not 0), and
//      loss = log S - (x_target - M)
//   4. the gradient of its columns from (M, log S): softmax - onehot.
// Shards of unequal width (V not divisible by tp) change nothing above.
#include "kernels/kernels.h"
#include "nn/cross_entropy.h"

namespace crucible::nn {

void vocab_parallel_cross_entropy(Arena& arena, TensorParallel& tp, IndexRange vocab, float* losses,
                                  void* logits, DType logits_type, const int32_t* targets, int N,
                                  float dscale) {
  const int Vl = int(vocab.size()), R = tp.size();
  const bool bf = logits_type == DType::bf16;
  float* mine = arena.allocate_array<float>(size_t(3) * N);  // [max | log_sum | x_target]
  float* all = arena.allocate_array<float>(size_t(3) * N * R);
  if (bf)
    kernels::logsumexp_rows_bf16(mine, mine + N, static_cast<const bf16*>(logits), N, Vl);
  else
    kernels::logsumexp_rows(mine, mine + N, static_cast<const float*>(logits), N, Vl);
  if (bf)
    kernels::target_logits_bf16(mine + 2 * N, static_cast<const bf16*>(logits), targets, vocab.lo, vocab.hi, N);
  else
    kernels::target_logits(mine + 2 * N, static_cast<const float*>(logits), targets, vocab.lo, vocab.hi, N);
  tp.allgather(all, mine, size_t(3) * N);
  float* max = mine;  // overwritten by the whole vocabulary's statistics
  float* log_sum = mine + N;
  kernels::combine_vocab_stats(max, log_sum, losses, all, targets, R, N);
  if (dscale == 0.0f) return;
  if (bf)
    kernels::softmax_xent_backward_bf16(static_cast<bf16*>(logits), max, log_sum, targets, int(vocab.lo), N,
                                        Vl, dscale);
  else
    kernels::softmax_xent_backward(static_cast<float*>(logits), max, log_sum, targets, int(vocab.lo), N, Vl,
                                   dscale);
}

}  // namespace crucible::nn
