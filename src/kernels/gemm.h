// GEMM through oneDNN's matmul: f32, or bf16 operands with f32 accumulation
// and an f32 or bf16 output (rounded once from the f32 result).
//
// Row-major C (M,N) = op(A) (M,K) * op(B) (K,N) [+ bias (N)] [+ C if accumulate],
// op = transpose when trans_* is set (expressed as strides; nothing is copied).
// Primitives are created once per distinct problem and cached; their
// scratchpad comes from crucible's allocator, so a repeated call allocates
// nothing. oneDNN runs on the same OpenMP pool as crucible's kernels.
// Thread-safe (calls are serialised on the cache; each call is parallel inside).
// Under a GPU's DeviceScope (kernels/device_scope.h) the same contract runs
// on that GPU through cuBLASLt (kernels/cuda/gemm.cc), on the scope's stream.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

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

// The MLP's first GEMM and its GELU in one pass, bf16, where the calling
// thread's device fuses them (gemm_gelu_fuses(): a GPU, through cuBLASLt's
// GELU_AUX_BIAS epilogue): pre (M,N) = bf16(A (M,K) B (K,N) + bias (N)) and
// act (M,N) = bf16(gelu(the same f32 sum)), row-major and contiguous (lda K,
// ldb N, ld N), f32 accumulation; saves the separate bias+GELU kernel's pass
// over pre. act is rounded from the unrounded sum, so it may differ from
// bias_gelu_forward_bf16(pre) by an ulp: within the bf16 path's bounds. The
// CPU does not fuse (oneDNN's GELU is not the kernels' formula, and the CPU's
// bits stay as they are): the caller runs the GEMM and the kernel there.
bool gemm_gelu_fuses();
void gemm_bias_gelu_bf16(int M, int N, int K, const bf16* A, const bf16* B, const float* bias, bf16* pre,
                         bf16* act);

// Its backward, in one pass where the calling thread's device fuses it (a
// GPU, through cuBLASLt's DGELU_BGRAD epilogue, where it has an algorithm for
// the problem and N is a multiple of 8): the MLP's second GEMM's input
// gradient dact = dy (M,K) W^T (W (N,K) row-major, as Linear keeps it) is
// never stored; dpre (M,N) = bf16(dact * gelu'(pre)), and dbias (N) = the
// column sums of the unrounded dact * gelu'(pre), written (not added).
// Saves the f32 dact's write and read: 12 bytes an element of (M,N) become 4.
// Returns false, having done nothing, where it does not fuse (the CPU, an N
// not a multiple of 8, no algorithm): the caller runs the GEMM into an f32
// dact and bias_gelu_backward_bf16. dpre is rounded from the same f32
// product as that path's, so the two differ by the GEMMs' summation order
// and the GELU derivative's last bits: within the bf16 path's bounds.
bool gemm_dgelu_bf16(int M, int N, int K, const bf16* dy, const bf16* W, const bf16* pre, bf16* dpre,
                     float* dbias);

// C (M,N) f32 = A (M,K) @ op(B) [+ bias (N)], A and B of type `in`, each row
// of C a function of its own row of A alone, whatever M: batched inference,
// where a sequence's logits must not depend on what it is batched with
// (nn/decoder.h). oneDNN picks its kernel and its split of K by M, and on
// some CPUs a row's bits then change with its batch (AMX in bf16, AVX2 in
// f32: gemm.cc invariant_rows, measured); there every call runs a fixed
// number of rows (16 on AMX, 6 on AVX2: their kernels' row blocks) through the one primitive made for
// them, a last partial block zero-padded, and a row's bits are that
// primitive's whatever rows ran beside it. AVX-512 without AMX, whose rows
// did not depend on M, keeps one call. A GPU runs gemm.
void gemm_rows_invariant(DType in, bool trans_b, int M, int N, int K, const void* A, int lda, const void* B, int ldb,
                         float* C, int ldc, const float* bias = nullptr);

// A constant B, packed once into the layout oneDNN's matmul picks for it (the
// same for every M: checked here for the inference shapes), so that a product
// does not reorder B on every call: 3-4x faster at M = 1 in bf16 on Zen 4
// (docs/performance.md, "Serving"). For weights that stay fixed while they
// are used (inference); the packed copy is crucible's memory, accounted as
// "gemm.packed". An M whose primitive wants another layout falls back to the
// plain B it was made from (which must outlive it). Copyable (shared).
class PackedWeights {
 public:
  PackedWeights() = default;
  // B of type `in`: (K,N) row-major, or with trans (N,K) used as its transpose.
  PackedWeights(DType in, bool trans, int N, int K, const void* B, int ldb);
  explicit operator bool() const { return impl_ != nullptr; }
  struct Impl;

 private:
  friend void gemm_packed(int M, const void* A, int lda, const PackedWeights& B, float* C, int ldc,
                          const float* bias);
  std::shared_ptr<Impl> impl_;
};

// C (M,N) f32 = A (M,K) of B's type (row-major, lda) @ B [+ bias (N)], each
// row from its own row of A alone whatever M (as gemm_rows_invariant: the
// weights are packed for, and run in, its fixed row blocks where it has
// them).
void gemm_packed(int M, const void* A, int lda, const PackedWeights& B, float* C, int ldc,
                 const float* bias = nullptr);

// Whether oneDNN has a bf16 matmul for this CPU (AVX-512 BF16/AMX class).
// Without one, bf16 operands are widened to f32 and run the f32 path (and a
// bf16 output is rounded from its f32 result).
bool gemm_bf16_native();

// Number of distinct GEMM problems created so far (for tests of the cache).
size_t gemm_cache_size();

}  // namespace crucible::kernels
