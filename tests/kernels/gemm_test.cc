#include "kernels/gemm.h"

#include <gtest/gtest.h>

#include <cstring>

#include "core/rng.h"
#include "kernels/reference.h"
#include "support/kernel_harness.h"

namespace crucible {
namespace {

TEST(Gemm, MatchesReferenceForAllTransposesAccumulateAndBias) {
  Rng rng(testing::test_seed(), 77);
  for (auto [M, N, K] : {std::tuple{1, 1, 1}, {7, 13, 5}, {64, 96, 33}, {129, 67, 250}}) {
    for (int mode = 0; mode < 16; ++mode) {
      bool ta = mode & 1, tb = mode & 2, acc = mode & 4, use_bias = mode & 8;
      int lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 1, ldc = N + 2;
      auto A = testing::random_vector(rng, size_t(ta ? K : M) * lda);
      auto B = testing::random_vector(rng, size_t(tb ? N : K) * ldb);
      auto bias = testing::random_vector(rng, N);
      auto C = testing::random_vector(rng, size_t(M) * ldc);
      auto want = C;
      kernels::gemm(ta, tb, M, N, K, A.data(), lda, B.data(), ldb, C.data(), ldc, acc,
                    use_bias ? bias.data() : nullptr);
      kernels::ref::gemm(ta, tb, M, N, K, A.data(), lda, B.data(), ldb, want.data(), ldc, acc,
                         use_bias ? bias.data() : nullptr);
      for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j)
          ASSERT_NEAR(C[size_t(i) * ldc + j], want[size_t(i) * ldc + j], 1e-4 * (1 + K / 16.0))
              << "M=" << M << " N=" << N << " K=" << K << " mode=" << mode << " seed "
              << testing::test_seed();
    }
  }
}

TEST(Gemm, Bf16InputsMatchReferenceOnRoundedInputs) {
  Rng rng(testing::test_seed(), 78);
  int M = 37, N = 45, K = 64;
  auto A = testing::random_vector(rng, size_t(M) * K);
  auto B = testing::random_vector(rng, size_t(K) * N);
  std::vector<bf16> Ah(A.size()), Bh(B.size());
  for (size_t i = 0; i < A.size(); ++i) A[i] = to_f32(Ah[i] = to_bf16(A[i]));
  for (size_t i = 0; i < B.size(); ++i) B[i] = to_f32(Bh[i] = to_bf16(B[i]));
  std::vector<float> C(size_t(M) * N), want(C.size());
  kernels::gemm_bf16(false, false, M, N, K, Ah.data(), K, Bh.data(), N, C.data(), N, false);
  kernels::ref::gemm(false, false, M, N, K, A.data(), K, B.data(), N, want.data(), N, false,
                     nullptr);
  for (size_t i = 0; i < C.size(); ++i) ASSERT_NEAR(C[i], want[i], 1e-3);
}

TEST(Gemm, RepeatedProblemReusesThePrimitive) {
  std::vector<float> A(64 * 64, 1.0f), B(64 * 64, 1.0f), C(64 * 64);
  kernels::gemm(false, false, 64, 64, 64, A.data(), 64, B.data(), 64, C.data(), 64, false);
  size_t n = kernels::gemm_cache_size();
  kernels::gemm(false, false, 64, 64, 64, A.data(), 64, B.data(), 64, C.data(), 64, false);
  EXPECT_EQ(kernels::gemm_cache_size(), n);
  EXPECT_FLOAT_EQ(C[0], 64.0f);
}

// Packed weights (kernels::PackedWeights, inference): f32 and bf16, B plain
// or transposed, with and without bias, at several M, against the reference
// on the same (rounded) inputs; and each row the same whatever M it ran in.
TEST(Gemm, PackedWeightsMatchReferenceAtEveryM) {
  Rng rng(testing::test_seed(), 79);
  const int N = 70, K = 96;
  for (DType in : {DType::f32, DType::bf16})
    for (bool trans : {false, true})
      for (bool with_bias : {false, true}) {
        SCOPED_TRACE(std::string(in == DType::bf16 ? "bf16" : "f32") + (trans ? ", B transposed" : "") +
                     (with_bias ? ", bias" : ""));
        auto A = testing::random_vector(rng, size_t(40) * K);
        auto B = testing::random_vector(rng, size_t(K) * N);
        auto bias = testing::random_vector(rng, size_t(N));
        std::vector<bf16> Ah(A.size()), Bh(B.size());
        if (in == DType::bf16) {
          for (size_t i = 0; i < A.size(); ++i) A[i] = to_f32(Ah[i] = to_bf16(A[i]));
          for (size_t i = 0; i < B.size(); ++i) B[i] = to_f32(Bh[i] = to_bf16(B[i]));
        }
        const int ldb = trans ? K : N;
        const void* Bp = in == DType::bf16 ? static_cast<const void*>(Bh.data()) : B.data();
        const void* Ap = in == DType::bf16 ? static_cast<const void*>(Ah.data()) : A.data();
        kernels::PackedWeights packed(in, trans, N, K, Bp, ldb);
        std::vector<float> first_row;
        for (int M : {1, 5, 40}) {
          std::vector<float> C(size_t(M) * N), want(C.size());
          kernels::gemm_packed(M, Ap, K, packed, C.data(), N, with_bias ? bias.data() : nullptr);
          kernels::ref::gemm(false, trans, M, N, K, A.data(), K, B.data(), ldb, want.data(), N, false,
                             with_bias ? bias.data() : nullptr);
          for (size_t i = 0; i < C.size(); ++i) ASSERT_NEAR(C[i], want[i], 1e-3) << "M " << M;
          if (M == 1) first_row = C;
          else EXPECT_EQ(std::memcmp(first_row.data(), C.data(), size_t(N) * sizeof(float)), 0) << "M " << M;
        }
      }
}

// Batched inference's contract (kernels::gemm_rows_invariant, packed weights
// too): each row of C is its own row of A's alone, bit for bit, at every M,
// in f32 and bf16, at the inference shapes where oneDNN's native bf16 matmul
// changes its kernel (below 4 rows) or its split of K (from ~100 rows at
// N 768, K 3072, on an AMX Xeon).
TEST(Gemm, EveryRowIsItsOwnAtEveryM) {
  Rng rng(testing::test_seed(), 83);
  for (auto [N, K] : {std::pair{70, 96}, std::pair{768, 3072}})
    for (DType in : {DType::f32, DType::bf16}) {
      SCOPED_TRACE(std::to_string(N) + "x" + std::to_string(K) + (in == DType::bf16 ? " bf16" : " f32"));
      const int max_m = 130;
      auto A = testing::random_vector(rng, size_t(max_m) * K), B = testing::random_vector(rng, size_t(K) * N);
      auto bias = testing::random_vector(rng, size_t(N));
      std::vector<bf16> Ah(A.size()), Bh(B.size());
      for (size_t i = 0; i < A.size(); ++i) Ah[i] = to_bf16(A[i]);
      for (size_t i = 0; i < B.size(); ++i) Bh[i] = to_bf16(B[i]);
      const void* Ap = in == DType::bf16 ? static_cast<const void*>(Ah.data()) : A.data();
      const void* Bp = in == DType::bf16 ? static_cast<const void*>(Bh.data()) : B.data();
      const size_t a_row = size_t(K) * (in == DType::bf16 ? 2 : 4);
      kernels::PackedWeights packed(in, false, N, K, Bp, N);
      for (bool use_packed : {false, true}) {
        auto product = [&](int M, const void* a, float* C) {
          if (use_packed) kernels::gemm_packed(M, a, K, packed, C, N, bias.data());
          else kernels::gemm_rows_invariant(in, false, M, N, K, a, K, Bp, N, C, N, bias.data());
        };
        // Each row alone, then every M from the first row on.
        std::vector<float> alone(size_t(max_m) * N);
        for (int r = 0; r < max_m; ++r)
          product(1, static_cast<const char*>(Ap) + size_t(r) * a_row, alone.data() + size_t(r) * N);
        for (int M : {2, 3, 5, 16, 17, 100, 130}) {
          std::vector<float> C(size_t(M) * N);
          product(M, Ap, C.data());
          for (int r = 0; r < M; ++r)
            ASSERT_EQ(std::memcmp(C.data() + size_t(r) * N, alone.data() + size_t(r) * N, size_t(N) * sizeof(float)),
                      0)
                << (use_packed ? "packed" : "plain") << ", row " << r << " of " << M;
        }
      }
    }
}

}  // namespace
}  // namespace crucible
