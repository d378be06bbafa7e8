#include "kernels/kernels.h"
#include "nn/layers.h"

namespace crucible::nn {

// out (B,T,C); tokens (B,T)
void Embedding::forward(float* out, const int32_t* toks, int B, int T) {
  tokens = toks;
  kernels::embedding_forward(out, toks, wte.value, wpe.value, B, T, C);
}

// dout (B,T,C) -> dwte +=, dwpe +=
void Embedding::backward(const float* dout, int B, int T) {
  kernels::embedding_backward(wte.grad, wpe.grad, dout, tokens, B, T, C);
}

}  // namespace crucible::nn
