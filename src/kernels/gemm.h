// GEMM through oneDNN's matmul: f32, or bf16 operands with f32 accumulation
// and an f32 or bf16 output (rounded once from the f32 result).
//
// Row-major C (M,N) = op(A) (M,K) * op(B) (K,N) [+ bias (N)] [+ C if accumulate],
// op = transpose when trans_* is set (expressed as strides; nothing is copied).
// Primitives are created once per distinct problem and cached; their
// scratchpad comes from crucible's allocator, so a repeated call allocates
// nothing. oneDNN runs on the same OpenMP pool as crucible's kernels.
// Thread-safe (calls are serialised on the cache; each call is parallel inside).
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace crucible::kernels {

// The general form: A and B of type `in`, C of type `out`; accumulating
// (C += ...) needs an f32 C. bias is f32 whatever the types.
void gemm(DType in, DType out, bool trans_a, bool trans_b, int M, int N, int K, const void* A,
          int lda, const void* B, int ldb, void* C, int ldc, bool accumulate,
          const float* bias = nullptr);

void gemm(bool trans_a, bool trans_b, int M, int N, int K, const float* A, int lda,
          const float* B, int ldb, float* C, int ldc, bool accumulate,
          const float* bias = nullptr);

void gemm_bf16(bool trans_a, bool trans_b, int M, int N, int K, const bf16* A, int lda,
               const bf16* B, int ldb, float* C, int ldc, bool accumulate,
               const float* bias = nullptr);

// Whether oneDNN has a bf16 matmul for this CPU (AVX-512 BF16/AMX class).
// Without one, bf16 operands are widened to f32 and run the f32 path (and a
// bf16 output is rounded from its f32 result).
bool gemm_bf16_native();

// Number of distinct GEMM problems created so far (for tests of the cache).
size_t gemm_cache_size();

}  // namespace crucible::kernels
