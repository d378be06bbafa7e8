#include "kernels/kernels.h"
#include "nn/layers.h"

namespace crucible::nn {

// x (B,T,C) -> qkv (B,T,3Ch) -> y (B,T,Ch) -> out (B,T,C); sequence parallel:
// x and out are (B*T/tp, C) rows (nn/tensor_parallel.h).
void CausalSelfAttention::forward(Arena& arena, float* out, const float* x, int B, int T) {
  const int N = B * T, Ch = c_proj.in;
  qkv = arena.allocate_array<float>(size_t(N) * 3 * Ch);
  y = arena.allocate_array<float>(size_t(N) * Ch);
  lse = arena.allocate_array<float>(size_t(B) * NH * T);
  if (sequence) {  // the rows gathered for c_attn only: backward gathers them again
    const size_t rows = size_t(N / tp->size()) * C;
    x_rows = x;
    Arena::Mark m = arena.mark();
    c_attn.forward(qkv, gather_rows(arena, *tp, x, rows), N);
    arena.rewind(m);
    c_attn.x = nullptr;
  } else {
    c_attn.forward(qkv, x, N);
  }
  kernels::attention_forward(y, lse, qkv, B, T, Ch, NH);
  // Row-parallel: each rank's product is a partial sum; the first adds the bias.
  const bool bias = !tp || tp->rank() == 0;
  if (sequence) {
    Arena::Mark m = arena.mark();
    float* partial = arena.allocate_array<float>(size_t(N) * C);
    c_proj.forward(partial, y, N, bias);
    tp->reduce_scatter(out, partial, size_t(N / tp->size()) * C);
    arena.rewind(m);
  } else {
    c_proj.forward(out, y, N, bias);
    if (tp) tp->allreduce(out, size_t(N) * C);
  }
}

// dout (B,T,C) -> dx (B,T,C); sequence parallel: (B*T/tp, C) rows of each.
void CausalSelfAttention::backward(Arena& arena, float* dx, const float* dout, int B, int T,
                                   BackwardPass pass) {
  const int N = B * T, Ch = c_proj.in;
  const size_t NC = size_t(N) * C, NCh = size_t(N) * Ch, rows = sequence ? NC / size_t(tp->size()) : NC;
  if (pass == BackwardPass::kWeight) {
    c_proj.backward(nullptr, nullptr, N, true, pass);
    Arena::Mark m = arena.mark();
    if (sequence) c_attn.x = gather_rows(arena, *tp, x_rows, rows);
    c_attn.backward(nullptr, nullptr, N, true, pass);
    if (sequence) c_attn.x = nullptr, arena.rewind(m);
    return;
  }
  const bool keep = pass == BackwardPass::kInput;  // the weight pass reads these later
  Arena::Mark m = arena.mark();
  // The block's running gradient changes after this: a kInput pass keeps a
  // copy (sequence parallel: the gathered rows are one).
  if (sequence)
    dout = gather_rows(arena, *tp, dout, rows);
  else if (keep)
    dout = arena_copy(arena, dout, NC);
  float* dy = arena.allocate_array<float>(NCh);
  float* dqkv = arena.allocate_array<float>(3 * NCh);
  c_proj.backward(dy, dout, N, true, pass);
  kernels::attention_backward(dqkv, dy, qkv, y, lse, B, T, Ch, NH);
  if (sequence) {  // column-parallel: each rank's dx is its heads' share, summed onto the rows
    Arena::Mark scratch = arena.mark();
    if (!keep) c_attn.x = gather_rows(arena, *tp, x_rows, rows);
    float* partial = arena.allocate_array<float>(NC);
    c_attn.backward(partial, dqkv, N, true, pass);
    tp->reduce_scatter(dx, partial, rows);
    c_attn.x = nullptr;
    arena.rewind(scratch);
  } else {
    c_attn.backward(dx, dqkv, N, true, pass);
    if (tp) tp->allreduce(dx, NC);  // column-parallel: each rank's dx is its heads' share
  }
  if (!keep) arena.rewind(m);
}

}  // namespace crucible::nn
