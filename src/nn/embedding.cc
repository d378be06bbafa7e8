#include <algorithm>

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
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    float* o = looked + size_t(n) * C;
    const int64_t t = toks[n];
    if (t >= vocab.lo && t < vocab.hi)
      std::copy_n(wte.value + size_t(t - vocab.lo) * C, C, o);
    else
      std::fill_n(o, C, 0.0f);
  }
  if (sequence)
    tp->reduce_scatter(out, looked, size_t(rows) * C);
  else
    tp->allreduce(out, size_t(N) * C);
  arena.rewind(m);
#pragma omp parallel for schedule(static)
  for (int n = 0; n < rows; ++n) {
    float* o = out + size_t(n) * C;
    const float* p = wpe.value + size_t((first + n) % T) * C;
    for (int c = 0; c < C; ++c) o[c] += p[c];
  }
}

// dout (B,T,C), sequence parallel (B*T/tp, C) rows -> dwte += (or rows
// appended), dwpe +=
void Embedding::backward(Arena& arena, const float* dout, int B, int T) {
  if (!tp && !rows) {
    kernels::embedding_backward(wte.grad, wpe.grad, dout, tokens, B, T, C);
    return;
  }
  Arena::Mark m = arena.mark();  // sequence parallel: every rank's rows, so wpe's gradient is whole
  if (sequence) dout = gather_rows(arena, *tp, dout, size_t(B * T / tp->size()) * C);
  const int N = B * T;
  if (rows) {
    CRUCIBLE_CHECK(rows->count + size_t(N) <= rows->capacity, "[nn] more embedding rows than their buffer holds");
    std::copy_n(tokens, N, rows->tokens + rows->count);
    std::copy_n(dout, size_t(N) * C, rows->rows + rows->count * size_t(C));
    rows->count += size_t(N);
  }
  // dout is the whole gradient on every rank; each keeps its rows'. Threads
  // split the channels, so repeated tokens add in one order (deterministic).
#pragma omp parallel for schedule(static)
  for (int c0 = 0; c0 < C; c0 += 64) {
    const int c1 = std::min(C, c0 + 64);
    for (int n = 0; n < N; ++n) {
      const float* d = dout + size_t(n) * C;
      float* p = wpe.grad + size_t(n % T) * C;
      for (int c = c0; c < c1; ++c) p[c] += d[c];
      const int64_t t = tokens[n];
      if (rows || t < vocab.lo || t >= vocab.hi) continue;
      float* e = wte.grad + size_t(t - vocab.lo) * C;
      for (int c = c0; c < c1; ++c) e[c] += d[c];
    }
  }
  arena.rewind(m);
}

}  // namespace crucible::nn
