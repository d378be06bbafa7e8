// Naive reference kernels: the test oracle for every fast kernel in
// kernels.h. Same signatures and contracts (signatures.inc), written for
// obviousness, not speed: plain loops, double accumulation. The bf16
// variants widen their bf16 inputs, run the f32 reference, and round the
// bf16 outputs once (ref/bf16_ref.cc).
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "kernels/step_scalars.h"

namespace crucible::kernels::ref {

#include "kernels/signatures.inc"

// C (M,N) = op(A) op(B) (+ C if accumulate) (+ bias (N)), row-major, op = transpose when set.
void gemm(bool trans_a, bool trans_b, int M, int N, int K, const float* A, int lda,
          const float* B, int ldb, float* C, int ldc, bool accumulate, const float* bias);

}  // namespace crucible::kernels::ref
