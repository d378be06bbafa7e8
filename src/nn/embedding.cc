#include "core/check.h"
#include "kernels/kernels.h"
#include "nn/layers.h"

namespace crucible::nn {

// out (B,T,C), sequence parallel (B*T/tp, C) rows; tokens (B,T)
void Embedding::forward(Arena& arena, float* out, const int32_t* toks, int B, int T) {
  tokens = toks;
  if (!tp) {
    kernels::embedding_forward(out, toks, wte.value, wpe.value, B, T, C);
    return;
  }
  // Vocab-parallel: the rows this rank holds (zero elsewhere), summed over
  // the group (one rank contributes each row: the sum is exact; sequence
  // parallel: onto this rank's rows), then wpe.
  const int N = B * T, rows = sequence ? N / tp->size() : N, first = sequence ? tp->rank() * rows : 0;
  Arena::Mark m = arena.mark();
  float* looked = sequence ? arena.allocate_array<float>(size_t(N) * C) : out;
  kernels::embedding_lookup(looked, toks, wte.value, vocab.lo, vocab.hi, N, C);
  if (sequence)
    tp->reduce_scatter(out, looked, size_t(rows) * C);
  else
    tp->allreduce(out, size_t(N) * C);
  arena.rewind(m);
  kernels::add_positions(out, wpe.value, first, rows, T, C);
}

// dout (B,T,C), sequence parallel (B*T/tp, C) rows -> dwte += (or rows
// appended), dwpe +=
void Embedding::backward(Arena& arena, const float* dout, int B, int T) {
  Arena::Mark m = arena.mark();  // sequence parallel: every rank's rows, so wpe's gradient is whole
  if (sequence) dout = gather_rows(arena, *tp, dout, size_t(B * T / tp->size()) * C);
  const int N = B * T;
  if (rows) {
    CRUCIBLE_CHECK(rows->count + size_t(N) <= rows->capacity, "[nn] more embedding rows than their buffer holds");
    kernels::copy_bytes(rows->tokens + rows->count, tokens, size_t(N) * sizeof(int32_t));
    kernels::copy_bytes(rows->rows + rows->count * size_t(C), dout, size_t(N) * C * sizeof(float));
    rows->count += size_t(N);
  }
  // dout is the whole gradient on every rank; each keeps its rows' (wte's
  // gradient: none here when its rows are collected for later).
  kernels::embedding_backward(rows ? nullptr : wte.grad, wpe.grad, dout, tokens, vocab.lo, vocab.hi, B, T, C);
  arena.rewind(m);
}

}  // namespace crucible::nn
