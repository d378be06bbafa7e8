// Token + position embedding, forward and backward (contracts in
// signatures.inc). Compiled once per ISA.
//
// The backward is a scatter-add: several positions may carry the same token,
// so rows of dwte are hit more than once. Rather than atomics or per-thread
// copies of dwte (V x C, 150 MB for GPT-2), each thread owns a slice of
// channels and walks every token in order for it: no two threads touch the
// same float, and each float receives its additions in token order, so the
// result is bit-identical to the serial loop whatever the thread count.
#include <cstring>

#include "kernels/isa/isa.h"
#include "kernels/isa/vec.h"

namespace crucible::kernels::CRUCIBLE_ISA {
namespace {

// Channels per backward work item: a multiple of every kW (4, 8, 16), two
// cache lines wide, and small enough that C = 768 gives 24 items to share.
constexpr int kSlice = 32;

}  // namespace

// out (B,T,C) = wte[idx[b,t]] (V,C) + wpe[t] (T_max,C)
void embedding_forward(float* out, const int32_t* idx, const float* wte, const float* wpe, int B,
                       int T, int C) {
#pragma omp parallel for schedule(static)
  for (int bt = 0; bt < B * T; ++bt) {
    const float* e = wte + size_t(idx[bt]) * C;  // (C)
    const float* p = wpe + size_t(bt % T) * C;   // (C)
    float* o = out + size_t(bt) * C;             // (C)
    int c = 0;
    for (; c + kW <= C; c += kW) store(o + c, load(e + c) + load(p + c));
    if (c < C) store_partial(o + c, load_partial(e + c, C - c) + load_partial(p + c, C - c), C - c);
  }
}

// dwte (hi-lo,C) +=, dwpe (T_max,C) += ; dout (B,T,C), idx (B,T)
void embedding_backward(float* dwte, float* dwpe, const float* dout, const int32_t* idx, int64_t lo,
                        int64_t hi, int B, int T, int C) {
  int slices = (C + kSlice - 1) / kSlice;
#pragma omp parallel
  {
    // dwpe: row t gathers dout[b,t] for b = 0..B-1, so rows are independent.
    if (dwpe) {
#pragma omp for schedule(static) nowait
      for (int t = 0; t < T; ++t)
        for (int b = 0; b < B; ++b) add_into(dwpe + size_t(t) * C, dout + (size_t(b) * T + t) * C, C);
    }

    // dwte: channel slices, every token in order within a slice.
    if (dwte) {
#pragma omp for schedule(static)
      for (int s = 0; s < slices; ++s) {
        int c0 = s * kSlice, n = C - c0 < kSlice ? C - c0 : kSlice;
        for (int bt = 0; bt < B * T; ++bt) {
          const int64_t t = idx[bt];
          if (t >= lo && t < hi) add_into(dwte + size_t(t - lo) * C + c0, dout + size_t(bt) * C + c0, n);
        }
      }
    }
  }
}

// out (N,C) = wte[idx - lo] (hi-lo,C) or 0
void embedding_lookup(float* out, const int32_t* idx, const float* wte, int64_t lo, int64_t hi, int N,
                      int C) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    float* o = out + size_t(n) * C;  // (C)
    const int64_t t = idx[n];
    if (t >= lo && t < hi)
      std::memcpy(o, wte + size_t(t - lo) * C, size_t(C) * sizeof(float));
    else
      std::memset(o, 0, size_t(C) * sizeof(float));
  }
}

// out (N,C) += wpe[(first + n) % T] (T_max,C)
void add_positions(float* out, const float* wpe, int first, int N, int T, int C) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) add_into(out + size_t(n) * C, wpe + size_t((first + n) % T) * C, C);
}

}  // namespace crucible::kernels::CRUCIBLE_ISA
