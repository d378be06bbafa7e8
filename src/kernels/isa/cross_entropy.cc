// Softmax + cross-entropy fused with its gradient (contract in
// signatures.inc). Compiled once per ISA.
//
// A row of V = 50304 logits is 200 KB: it fits L2, not L1, and the logits of
// a whole batch do not fit anywhere, so each row is read from memory once.
// The cost is the exponentials, not the bytes, so each element gets one:
//
// Pass 1 (online softmax) walks the row in chunks of kChunk vectors, takes
// the chunk's max first and rescales the running sum once per chunk, not per
// element. When a gradient is wanted it also writes e = exp(x - chunk max)
// back over the logits (bf16 logits: into a per-thread f32 row) and keeps the
// chunk maxima (a small stack array).
// Pass 2 rereads the row from L2 and scales each chunk by one factor,
// exp(chunk max - lse) * dscale, which turns e into softmax * dscale; the
// target's entry then gets its -dscale. Rows are independent: parallel over N.
//
// lse is kept as max + log_sum, never added up: with logits in the hundreds a
// float lse has an ulp of ~1e-5, which would swamp the loss and 1 - p of a
// confident prediction; every use subtracts max first (exact) instead.
#include <algorithm>
#include <cfloat>
#include <cmath>

#include "core/check.h"
#include "kernels/isa/isa.h"
#include "kernels/isa/vec.h"

namespace crucible::kernels::CRUCIBLE_ISA {
namespace {

constexpr int kChunk = 8;  // vectors per rescale of the running sum
constexpr int kChunkElems = kChunk * kW;
constexpr int kMaxV = 1 << 18;  // bound of the chunk-max stack array
constexpr int kMaxChunks = kMaxV / kChunkElems;

// Running state of the online softmax: sum of exp(x - max) per lane, shared max.
struct Online {
  float max = -FLT_MAX;  // not -inf, so max - new_max is never inf - inf
  vf sum = splat(0.0f);

  // One full chunk x[0..kChunkElems); with kWriteExp, e := exp(x - chunk max)
  // (e may be x when x is f32). Returns the chunk's max (the running max after it).
  template <bool kWriteExp, typename L>
  float add_chunk(const L* x, float* e_out) {
    vf mv = splat(max);
    for (int j = 0; j < kChunk; ++j) mv = vmax(mv, load(x + j * kW));
    float new_max = hmax(mv);
    vf acc = sum * vexp(splat(max - new_max));
    for (int j = 0; j < kChunk; ++j) {  // reloads from L1: cheaper than spilling registers
      vf e = vexp(load(x + j * kW) - new_max);
      acc += e;
      if constexpr (kWriteExp) store(e_out + j * kW, e);
    }
    sum = acc;
    return max = new_max;
  }
};

// logsumexp(row) = max + log_sum.
struct LogSumExp {
  float max, log_sum;
};

// Pass 1 over row (V): returns logsumexp(row). With kWriteExp, e[v] :=
// exp(row[v] - chunk_max[v / kChunkElems]) and chunk_max is filled (e may be
// row when L is float). L: float or bf16; row is only read.
template <bool kWriteExp, typename L>
LogSumExp row_logsumexp(const L* row, int V, float* chunk_max, float* e = nullptr) {
  Online st;
  int v = 0, k = 0;
  for (; v + kChunkElems <= V; v += kChunkElems, ++k) {
    float cm = st.add_chunk<kWriteExp>(row + v, kWriteExp ? e + v : nullptr);
    if constexpr (kWriteExp) chunk_max[k] = cm;
  }
  if (int left = V - v) {  // last partial chunk, padded with -inf (exp 0)
    float tail[kChunkElems];
    for (int i = 0; i < kChunkElems; ++i) tail[i] = i < left ? elem(row[v + i]) : -INFINITY;
    float cm = st.add_chunk<kWriteExp>(tail, tail);
    if constexpr (kWriteExp) {
      chunk_max[k] = cm;
      std::copy(tail, tail + left, e + v);
    }
  }
  return {st.max, std::log(hsum(st.sum))};
}

// One row with a target (>= 0) and dscale != 0: returns the loss; row (V)
// := its gradient (softmax - onehot) * dscale, one exponential per logit.
// e (V): f32 work row for the exponentials, row itself when L is float; a
// bf16 row is read by pass 1 and written, rounded once, by pass 2.
template <typename L>
float row_xent(L* row, float* e, int target, int V, float dscale) {
  const float x_target = elem(row[target]);  // read before pass 1 may overwrite it
  float chunk_max[kMaxChunks];
  LogSumExp lse = row_logsumexp<true>(row, V, chunk_max, e);
  // Pass 2: e holds exp(x - chunk max); scale each chunk to softmax * dscale.
  for (int v = 0, k = 0; v < V; v += kChunkElems, ++k) {
    vf scale = vexp(splat((chunk_max[k] - lse.max) - lse.log_sum)) * dscale;
    int end = std::min(V, v + kChunkElems), i = v;
    for (; i + kW <= end; i += kW) store(row + i, load(e + i) * scale);
    if (i < end) store_partial(row + i, load_partial(e + i, end - i) * scale, end - i);
  }
  // p - 1 by expm1: exact where p ~ 1, where exp(.) - 1 would cancel to 0.
  row[target] = from_f32<L>(std::expm1((x_target - lse.max) - lse.log_sum) * dscale);
  return lse.log_sum - (x_target - lse.max);
}

// L: float (the gradient in place) or bf16 (pass 1 reads the bf16 row and
// keeps its exponentials in a per-thread f32 row; pass 2 writes the gradient
// into the bf16 row, rounded once: the bits of the f32 gradient rounded).
template <typename L>
void xent(float* losses, L* logits, const int32_t* targets, int N, int V, float dscale) {
  CRUCIBLE_CHECK(V <= kMaxV, "[softmax_cross_entropy] V exceeds the chunk-max buffer");
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    L* row = logits + size_t(n) * V;
    int target = targets[n];
    CRUCIBLE_CHECK(target < V, "[softmax_cross_entropy] target id out of the vocabulary");
    if (target < 0) {  // ignored position (padding)
      losses[n] = 0.0f;
      if (dscale != 0.0f) std::fill(row, row + V, from_f32<L>(0.0f));
      continue;
    }
    if (dscale == 0.0f) {  // loss only: the logits stay untouched
      LogSumExp lse = row_logsumexp<false>(row, V, nullptr);
      losses[n] = lse.log_sum - (elem(row[target]) - lse.max);
      continue;
    }
    if constexpr (sizeof(L) == 4)
      losses[n] = row_xent(row, row, target, V, dscale);
    else
      losses[n] = row_xent(row, thread_scratch<1>(size_t(V)), target, V, dscale);
  }
}

}  // namespace

// losses (N) ; logits (N,V), overwritten by the gradient if dscale != 0 ; targets (N)
void softmax_cross_entropy(float* losses, float* logits, const int32_t* targets, int N, int V,
                           float dscale) {
  xent(losses, logits, targets, N, V, dscale);
}

void softmax_cross_entropy_bf16(float* losses, bf16* logits, const int32_t* targets, int N, int V,
                                float dscale) {
  xent(losses, logits, targets, N, V, dscale);
}

// The vocabulary-parallel halves (contract in signatures.inc). Pass 1 is the
// loss-only pass above; pass 2 cannot reuse pass 1's exponentials (the
// exchange between them needs every rank's row statistics), so each logit
// gets two exponentials instead of one.
namespace {

template <typename L>
void rows_logsumexp(float* max, float* log_sum, const L* logits, int N, int V) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    LogSumExp lse = row_logsumexp<false>(logits + size_t(n) * V, V, nullptr);
    max[n] = lse.max;
    log_sum[n] = lse.log_sum;
  }
}

template <typename L>
void xent_backward(L* logits, const float* max, const float* log_sum, const int32_t* targets,
                   int offset, int N, int V, float dscale) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    L* row = logits + size_t(n) * V;
    if (targets[n] < 0) {
      std::fill(row, row + V, from_f32<L>(0.0f));
      continue;
    }
    const int t = targets[n] - offset;
    const float x_target = t >= 0 && t < V ? elem(row[t]) : 0.0f;
    const vf shift = splat(max[n]), ls = splat(log_sum[n]), ds = splat(dscale);
    int v = 0;
    for (; v + kW <= V; v += kW) store(row + v, vexp((load(row + v) - shift) - ls) * ds);
    if (v < V) store_partial(row + v, vexp((load_partial(row + v, V - v) - shift) - ls) * ds, V - v);
    // p - 1 by expm1: exact where p ~ 1.
    if (t >= 0 && t < V) row[t] = from_f32<L>(std::expm1((x_target - max[n]) - log_sum[n]) * dscale);
  }
}

}  // namespace

void logsumexp_rows(float* max, float* log_sum, const float* logits, int N, int V) {
  rows_logsumexp(max, log_sum, logits, N, V);
}
void logsumexp_rows_bf16(float* max, float* log_sum, const bf16* logits, int N, int V) {
  rows_logsumexp(max, log_sum, logits, N, V);
}
void softmax_xent_backward(float* logits, const float* max, const float* log_sum,
                           const int32_t* targets, int offset, int N, int V, float dscale) {
  xent_backward(logits, max, log_sum, targets, offset, N, V, dscale);
}
void softmax_xent_backward_bf16(bf16* logits, const float* max, const float* log_sum,
                                const int32_t* targets, int offset, int N, int V, float dscale) {
  xent_backward(logits, max, log_sum, targets, offset, N, V, dscale);
}

}  // namespace crucible::kernels::CRUCIBLE_ISA
