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

void embedding_backward(float* dwte, float* dwpe, const float* dout, const int32_t* idx, int B,
                        int T, int C) {
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t) {
      const float* d = dout + (size_t(b) * T + t) * C;
      float* e = dwte + size_t(idx[b * T + t]) * C;
      float* p = dwpe + size_t(t) * C;
      for (int c = 0; c < C; ++c) {
        e[c] += d[c];
        p[c] += d[c];
      }
    }
}

}  // namespace crucible::kernels::ref
