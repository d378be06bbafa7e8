#include "kernels/reference.h"

namespace crucible::kernels::ref {

void embedding_forward(float* out, const int32_t* idx, const float* wte, const float* wpe, int B,
                       int T, int C) {
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t) {
      const float* e = wte + size_t(idx[b * T + t]) * C;
      const float* p = wpe + size_t(t) * C;
      float* o = out + (size_t(b) * T + t) * C;
      for (int c = 0; c < C; ++c) o[c] = e[c] + p[c];
    }
}

void embedding_backward(float* dwte, float* dwpe, const float* dout, const int32_t* idx, int64_t lo,
                        int64_t hi, int B, int T, int C) {
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t) {
      const float* d = dout + (size_t(b) * T + t) * C;
      const int64_t tok = idx[b * T + t];
      float* e = dwte && tok >= lo && tok < hi ? dwte + size_t(tok - lo) * C : nullptr;
      float* p = dwpe ? dwpe + size_t(t) * C : nullptr;
      for (int c = 0; c < C; ++c) {
        if (e) e[c] += d[c];
        if (p) p[c] += d[c];
      }
    }
}

void embedding_lookup(float* out, const int32_t* idx, const float* wte, int64_t lo, int64_t hi, int N,
                      int C) {
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < C; ++c)
      out[size_t(n) * C + c] = idx[n] >= lo && idx[n] < hi ? wte[size_t(idx[n] - lo) * C + c] : 0.0f;
}

void add_positions(float* out, const float* wpe, int first, int N, int T, int C) {
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < C; ++c) out[size_t(n) * C + c] += wpe[size_t((first + n) % T) * C + c];
}

}  // namespace crucible::kernels::ref
