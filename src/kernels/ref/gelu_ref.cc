#include <cmath>

#include "kernels/reference.h"

namespace crucible::kernels::ref {
namespace {
constexpr double kS = 0.7978845608028654;  // sqrt(2/pi)
}

void bias_gelu_forward(float* out, float* pre, const float* bias, int N, int C) {
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < C; ++c) {
      size_t i = size_t(n) * C + c;
      pre[i] += bias[c];
      double x = pre[i];
      out[i] = float(0.5 * x * (1.0 + std::tanh(kS * (x + 0.044715 * x * x * x))));
    }
}

void bias_gelu_backward(float* dpre, float* dbias, const float* dout, const float* pre, int N,
                        int C) {
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < C; ++c) {
      size_t i = size_t(n) * C + c;
      double x = pre[i];
      double u = kS * (x + 0.044715 * x * x * x);
      double th = std::tanh(u);
      double du = kS * (1.0 + 3.0 * 0.044715 * x * x);
      double g = 0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * du;
      float d = float(dout[i] * g);
      dpre[i] = d;
      dbias[c] += d;
    }
}

}  // namespace crucible::kernels::ref
