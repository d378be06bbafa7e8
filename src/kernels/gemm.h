// GEMM through oneDNN's matmul (f32, and bf16 inputs with f32 output).
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

void gemm(bool trans_a, bool trans_b, int M, int N, int K, const float* A, int lda,
          const float* B, int ldb, float* C, int ldc, bool accumulate,
          const float* bias = nullptr);

void gemm_bf16(bool trans_a, bool trans_b, int M, int N, int K, const bf16* A, int lda,
               const bf16* B, int ldb, float* C, int ldc, bool accumulate,
               const float* bias = nullptr);

// Whether oneDNN has a bf16 matmul for this CPU (AVX-512 BF16/AMX class).
// Without one, gemm_bf16 widens its operands to f32 and runs the f32 path.
bool gemm_bf16_native();

// Number of distinct GEMM problems created so far (for tests of the cache).
size_t gemm_cache_size();

}  // namespace crucible::kernels
