// The CUDA backend's kernel table and GEMM (kernels/cuda/table.cc,
// kernels/cuda/gemm.cc) under a GPU's DeviceScope, called through the same
// kernels:: functions nn calls, against the naive references on fresh random
// inputs, odd sizes included. Elementwise passes must match bit for bit
// (one rounding each, the same on both devices); sums, exponentials and
// GEMMs within bounds from their roundings.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/rng.h"
#include "gpu/gpu_support.h"
#include "kernels/device_scope.h"
#include "kernels/gemm.h"
#include "kernels/kernels.h"
#include "kernels/reference.h"
#include "support/kernel_harness.h"

namespace crucible {
namespace {

using gpu_test::DeviceBuffer;

// Without a GPU (CI): a kernel the device's table lacks is refused by name,
// before anything touches the device.
TEST(CudaTable, AKernelTheGpuLacksIsRefusedByName) {
  EXPECT_DEATH(
      {
        kernels::DeviceScope gpu(Device::cuda(0));
        kernels::attention_paged(nullptr, nullptr, 0, nullptr, 0, 1, nullptr, nullptr, 1, 1, 1);
      },
      "\\[kernels\\] attention_paged has no kernel on cuda:0 yet");
  // The scope ends with its block: this thread is on the CPU again.
  EXPECT_TRUE(kernels::current_target().device.is_cpu());
  EXPECT_STREQ(kernels::table_here().isa, kernels::active().isa);
}

TEST(CudaTable, StepPassesMatchTheReference) {
  REQUIRE_GPU();
  kernels::DeviceScope gpu(Device::cuda(0));
  Rng rng(testing::test_seed(), 0x9a55);
  for (size_t n : {size_t(1), size_t(1000), size_t(100003), size_t(1) << 22}) {
    SCOPED_TRACE("n = " + std::to_string(n));
    auto a = testing::random_vector(rng, n), b = testing::random_vector(rng, n);
    DeviceBuffer<float> da(a), db(b), out(n), filled(n), copied(n);
    DeviceBuffer<bf16> narrow(n);
    kernels::add(out.get(), da.get(), db.get(), n);
    kernels::fill(filled.get(), n, -2.5f);
    kernels::copy_bytes(copied.get(), da.get(), n * sizeof(float));
    kernels::convert_to_bf16(narrow.get(), da.get(), n);
    std::vector<float> want(n);
    kernels::ref::add(want.data(), a.data(), b.data(), n);
    std::vector<bf16> want16(n);
    kernels::ref::convert_to_bf16(want16.data(), a.data(), n);
    EXPECT_EQ(out.host(), want);
    EXPECT_EQ(filled.host(), std::vector<float>(n, -2.5f));
    EXPECT_EQ(copied.host(), a);
    const std::vector<bf16> got16 = narrow.host();
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(got16[i].bits, want16[i].bits) << i;
    // The bf16 wire's passes: 3 ranks' copies summed in rank order, rounded
    // once (and not), widened; the same bits as the CPU's.
    {
      const int W = 3;
      std::vector<bf16> pieces(size_t(W) * n);
      for (size_t i = 0; i < pieces.size(); ++i) pieces[i] = to_bf16(b[i % n] * float(1 + i / n));
      DeviceBuffer<bf16> dpieces(pieces), rounded(n);
      DeviceBuffer<float> sum(n), kept(n), wide(n);
      kernels::sum_bf16_pieces(sum.get(), rounded.get(), dpieces.get(), W, n);
      kernels::sum_bf16_pieces(kept.get(), nullptr, dpieces.get(), W, n);
      kernels::convert_to_f32(wide.get(), rounded.get(), n);
      std::vector<float> sum_ref(n), kept_ref(n), wide_ref(n);
      std::vector<bf16> rounded_ref(n);
      kernels::ref::sum_bf16_pieces(sum_ref.data(), rounded_ref.data(), pieces.data(), W, n);
      kernels::ref::sum_bf16_pieces(kept_ref.data(), nullptr, pieces.data(), W, n);
      kernels::ref::convert_to_f32(wide_ref.data(), rounded_ref.data(), n);
      EXPECT_EQ(sum.host(), sum_ref);
      EXPECT_EQ(kept.host(), kept_ref);
      EXPECT_EQ(wide.host(), wide_ref);
      const std::vector<bf16> r16 = rounded.host();
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(r16[i].bits, rounded_ref[i].bits) << i;
    }
    // Sums in double, added to a double in device memory (nothing read back
    // until host()): a different order than the CPU's, far below f32's
    // resolution of the result; the mean rounded to float, so within one
    // float ulp of the reference's.
    auto sums = [&] {
      DeviceBuffer<double> acc(std::vector<double>{0.5, 0.25});
      kernels::add_mean(acc.get(), da.get(), n);
      kernels::add_sum_squares(acc.get() + 1, da.get(), n);
      return acc.host();
    };
    const std::vector<double> got = sums();
    double mean_ref = 0.5, sq_ref = 0.25;
    kernels::ref::add_mean(&mean_ref, a.data(), n);
    kernels::ref::add_sum_squares(&sq_ref, a.data(), n);
    EXPECT_NEAR(got[0], mean_ref, 1e-7 * std::fabs(mean_ref - 0.5) + 1e-12);
    EXPECT_NEAR(got[1], sq_ref, 1e-12 * sq_ref);
    // Deterministic: the same bits again.
    EXPECT_EQ(sums(), got);
  }
}

TEST(CudaTable, EmbeddingAndVocabularyParallelPiecesMatchTheReference) {
  REQUIRE_GPU();
  kernels::DeviceScope gpu(Device::cuda(0));
  Rng rng(testing::test_seed(), 0xe3b);
  struct Shape {
    int B, T, C, V, lo, hi, first, R;
  };
  for (const Shape& sh : {Shape{1, 1, 1, 4, 0, 2, 0, 2}, Shape{2, 7, 33, 50, 10, 31, 3, 3},
                          Shape{4, 64, 768, 50257, 25000, 50257, 64, 2}}) {
    const int N = sh.B * sh.T, Vl = sh.hi - sh.lo;
    SCOPED_TRACE("B T C V = " + std::to_string(sh.B) + " " + std::to_string(sh.T) + " " +
                 std::to_string(sh.C) + " " + std::to_string(sh.V));
    std::vector<int32_t> idx(static_cast<size_t>(N));
    for (auto& t : idx) t = int32_t(rng.next_u32() % uint32_t(sh.V));
    auto wte = testing::random_vector(rng, size_t(sh.V) * sh.C),
         wpe = testing::random_vector(rng, size_t(sh.T) * sh.C);
    DeviceBuffer<int32_t> d_idx(idx);
    DeviceBuffer<float> d_wte(wte), d_wpe(wpe), out(size_t(N) * sh.C), looked(size_t(N) * sh.C);
    kernels::embedding_forward(out.get(), d_idx.get(), d_wte.get(), d_wpe.get(), sh.B, sh.T, sh.C);
    // The shard [lo, hi): wte's rows from lo.
    kernels::embedding_lookup(looked.get(), d_idx.get(), d_wte.get() + size_t(sh.lo) * sh.C, sh.lo,
                              sh.hi, N, sh.C);
    kernels::add_positions(looked.get(), d_wpe.get(), sh.first, N, sh.T, sh.C);
    std::vector<float> want(size_t(N) * sh.C), want_looked(want.size());
    kernels::ref::embedding_forward(want.data(), idx.data(), wte.data(), wpe.data(), sh.B, sh.T,
                                    sh.C);
    kernels::ref::embedding_lookup(want_looked.data(), idx.data(),
                                   wte.data() + size_t(sh.lo) * sh.C, sh.lo, sh.hi, N, sh.C);
    kernels::ref::add_positions(want_looked.data(), wpe.data(), sh.first, N, sh.T, sh.C);
    EXPECT_EQ(out.host(), want);
    EXPECT_EQ(looked.host(), want_looked);

    // Cross-entropy's pieces: the target logits of this shard's columns, and
    // R ranks' statistics combined.
    std::vector<int32_t> targets(idx);
    targets[0] = -1;  // an ignored row
    auto logits = testing::random_vector(rng, size_t(N) * Vl, -8, 8);
    std::vector<bf16> logits16(logits.size());
    for (size_t i = 0; i < logits.size(); ++i) logits16[i] = to_bf16(logits[i]);
    DeviceBuffer<int32_t> d_t(targets);
    DeviceBuffer<float> d_logits(logits), x(static_cast<size_t>(N)), x16(static_cast<size_t>(N));
    DeviceBuffer<bf16> d_logits16(logits16);
    kernels::target_logits(x.get(), d_logits.get(), d_t.get(), sh.lo, sh.hi, N);
    kernels::target_logits_bf16(x16.get(), d_logits16.get(), d_t.get(), sh.lo, sh.hi, N);
    std::vector<float> want_x(static_cast<size_t>(N)), want_x16(static_cast<size_t>(N));
    kernels::ref::target_logits(want_x.data(), logits.data(), targets.data(), sh.lo, sh.hi, N);
    kernels::ref::target_logits_bf16(want_x16.data(), logits16.data(), targets.data(), sh.lo, sh.hi,
                                     N);
    EXPECT_EQ(x.host(), want_x);
    EXPECT_EQ(x16.host(), want_x16);
    std::vector<float> all(size_t(sh.R) * 3 * N);
    for (int r = 0; r < sh.R; ++r)
      for (int n = 0; n < N; ++n) {
        float* part = all.data() + size_t(r) * 3 * N;
        part[n] = rng.uniform() * 16 - 8;
        part[N + n] = rng.uniform() * 5;
        part[2 * N + n] =
            targets[size_t(n)] >= 0 && targets[size_t(n)] % sh.R == r ? part[n] - 1.0f : 0.0f;
      }
    DeviceBuffer<float> d_all(all), mx(static_cast<size_t>(N)), ls(static_cast<size_t>(N)),
        loss(static_cast<size_t>(N));
    kernels::combine_vocab_stats(mx.get(), ls.get(), loss.get(), d_all.get(), d_t.get(), sh.R, N);
    std::vector<float> want_mx(static_cast<size_t>(N)), want_ls(want_mx), want_loss(want_mx);
    kernels::ref::combine_vocab_stats(want_mx.data(), want_ls.data(), want_loss.data(), all.data(),
                                      targets.data(), sh.R, N);
    EXPECT_EQ(mx.host(), want_mx);
    // expf and logf: CUDA's and glibc's differ by an ulp or two.
    const std::vector<float> got_ls = ls.host(), got_loss = loss.host();
    for (int n = 0; n < N; ++n) {
      ASSERT_NEAR(got_ls[size_t(n)], want_ls[size_t(n)],
                  1e-5f * (1 + std::fabs(want_ls[size_t(n)])))
          << n;
      ASSERT_NEAR(got_loss[size_t(n)], want_loss[size_t(n)],
                  1e-5f * (1 + std::fabs(want_loss[size_t(n)])))
          << n;
    }
    EXPECT_EQ(got_loss[0], 0.0f);
  }
}

// kernels::gemm on the GPU (cuBLASLt) against the double-accumulating
// reference on the same (bf16-rounded where bf16) inputs, every form the
// step uses: transposes, accumulation, the bias epilogue, bf16 in and out.
// Bounds: relative to sum |a||b| of each entry, f32 products and sums
// (2^-22 K) and a bf16 output's one rounding (2^-8 of |c|).
TEST(CudaGemm, EveryFormMatchesTheReference) {
  REQUIRE_GPU();
  kernels::DeviceScope gpu(Device::cuda(0));
  Rng rng(testing::test_seed(), 0x6e33);
  struct Form {
    bool ta, tb, acc, bias;
    DType in, out;
  };
  const std::vector<Form> forms = {{false, false, false, false, DType::f32, DType::f32},
                                   {false, true, false, true, DType::f32, DType::f32},
                                   {true, false, true, false, DType::f32, DType::f32},
                                   {false, false, false, true, DType::bf16, DType::bf16},
                                   {false, true, false, false, DType::bf16, DType::bf16},
                                   {true, false, true, false, DType::bf16, DType::f32},
                                   {false, true, false, false, DType::bf16, DType::f32}};
  for (auto [M, N, K] : {std::tuple{1, 1, 1}, std::tuple{17, 33, 65}, std::tuple{128, 768, 256},
                         std::tuple{2048, 257, 1024}, std::tuple{64, 50257, 768}})
    for (const Form& f : forms) {
      SCOPED_TRACE(std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K) +
                   (f.ta ? " ta" : "") + (f.tb ? " tb" : "") + (f.acc ? " acc" : "") +
                   (f.bias ? " bias" : "") + (f.in == DType::bf16 ? " bf16" : " f32") +
                   (f.out == DType::bf16 ? "->bf16" : "->f32"));
      const bool half = f.in == DType::bf16;
      // op(A) (M,K), op(B) (K,N), as stored: A (K,M) when ta, B (N,K) when tb.
      auto A = testing::random_vector(rng, size_t(M) * K),
           B = testing::random_vector(rng, size_t(K) * N);
      auto C0 = testing::random_vector(rng, size_t(M) * N),
           bias = testing::random_vector(rng, size_t(N));
      std::vector<bf16> A16(A.size()), B16(B.size());
      for (size_t i = 0; i < A.size(); ++i)
        A16[i] = to_bf16(A[i]), A[i] = half ? to_f32(A16[i]) : A[i];
      for (size_t i = 0; i < B.size(); ++i)
        B16[i] = to_bf16(B[i]), B[i] = half ? to_f32(B16[i]) : B[i];
      const int lda = f.ta ? M : K, ldb = f.tb ? K : N;
      std::vector<float> want = f.acc ? C0 : std::vector<float>(C0.size(), 0.0f);
      kernels::ref::gemm(f.ta, f.tb, M, N, K, A.data(), lda, B.data(), ldb, want.data(), N, f.acc,
                         f.bias ? bias.data() : nullptr);
      // The bound of each entry: sum |a||b| (+ |c| and |bias|).
      std::vector<float> absA(A.size()), absB(B.size()), mag(C0.size(), 0.0f);
      for (size_t i = 0; i < A.size(); ++i) absA[i] = std::fabs(A[i]);
      for (size_t i = 0; i < B.size(); ++i) absB[i] = std::fabs(B[i]);
      kernels::ref::gemm(f.ta, f.tb, M, N, K, absA.data(), lda, absB.data(), ldb, mag.data(), N,
                         false, nullptr);
      DeviceBuffer<float> dA(A), dB(B), dbias(bias),
          dC(f.acc ? C0 : std::vector<float>(C0.size(), 0.0f));
      DeviceBuffer<bf16> dA16(A16), dB16(B16), dC16(C0.size());
      const void* a = half ? static_cast<const void*>(dA16.get()) : dA.get();
      const void* b = half ? static_cast<const void*>(dB16.get()) : dB.get();
      void* c = f.out == DType::bf16 ? static_cast<void*>(dC16.get()) : dC.get();
      kernels::gemm(f.in, f.out, f.ta, f.tb, M, N, K, a, lda, b, ldb, c, N, f.acc,
                    f.bias ? dbias.get() : nullptr);
      ASSERT_TRUE(kernels::cuda::last_error("gemm").is_ok());
      auto check = [&](const std::vector<float>& got, const char* way) {
        for (size_t i = 0; i < got.size(); ++i) {
          const double scale =
              mag[i] + (f.acc ? std::fabs(C0[i]) : 0) + (f.bias ? std::fabs(bias[i % N]) : 0);
          const double bound =
              0x1p-22 * K * scale + (f.out == DType::bf16 ? 0x1p-8 * std::fabs(want[i]) : 0) + 1e-30;
          ASSERT_NEAR(got[i], want[i], bound) << way << ", entry " << i;
        }
      };
      auto widened = [&](DeviceBuffer<bf16>& d) {
        const std::vector<bf16> g16 = d.host();
        std::vector<float> got(g16.size());
        for (size_t i = 0; i < got.size(); ++i) got[i] = to_f32(g16[i]);
        return got;
      };
      check(f.out == DType::bf16 ? widened(dC16) : dC.host(), "cuBLASLt");
      // A bias on a bf16 C also through gemm's way where cuBLASLt has no
      // epilogue for it: the product in f32 row chunks (several at N 50257),
      // then the bias and one rounding.
      if (f.bias && f.out == DType::bf16) {
        DeviceBuffer<bf16> through(C0.size());
        kernels::cuda::gemm_bias_through_f32(f.in, f.ta, f.tb, M, N, K, a, lda, b, ldb, through.get(), N, f.acc,
                                             dbias.get(), kernels::current_target().stream);
        ASSERT_TRUE(kernels::cuda::last_error("gemm_bias_through_f32").is_ok());
        check(widened(through), "through f32");
      }
    }
}

// The MLP's first GEMM with its GELU (kernels::gemm_bias_gelu_bf16): pre as
// the bf16 GEMM with the bias epilogue, act the GELU of the same f32 sum,
// against the reference on bf16-rounded inputs. Sizes whose N is a multiple
// of 8 take cuBLASLt's GELU_AUX_BIAS epilogue, the others the GEMM and the
// bias+GELU kernel. act's bound adds one bf16 rounding of act, the GELU's
// slope (at most 1.13) times pre's sum error, and 1e-3 for a GELU formula or
// tanh that is not the reference's to the last bit.
TEST(CudaGemm, TheFusedBiasGeluMatchesTheReference) {
  REQUIRE_GPU();
  kernels::DeviceScope gpu(Device::cuda(0));
  ASSERT_TRUE(kernels::gemm_gelu_fuses());
  Rng rng(testing::test_seed(), 0x6e1u);
  for (auto [M, N, K] : {std::tuple{1, 8, 1}, std::tuple{17, 33, 65}, std::tuple{37, 1024, 256},
                         std::tuple{128, 3072, 768}, std::tuple{64, 4100, 100}}) {
    SCOPED_TRACE(std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K));
    auto A = testing::random_vector(rng, size_t(M) * K), B = testing::random_vector(rng, size_t(K) * N);
    auto bias = testing::random_vector(rng, size_t(N));
    std::vector<bf16> A16(A.size()), B16(B.size());
    for (size_t i = 0; i < A.size(); ++i) A16[i] = to_bf16(A[i]), A[i] = to_f32(A16[i]);
    for (size_t i = 0; i < B.size(); ++i) B16[i] = to_bf16(B[i]), B[i] = to_f32(B16[i]);
    std::vector<float> sum(size_t(M) * N, 0.0f), mag(sum.size(), 0.0f), act_want(sum.size());
    kernels::ref::gemm(false, false, M, N, K, A.data(), K, B.data(), N, sum.data(), N, false, bias.data());
    std::vector<float> absA(A.size()), absB(B.size());
    for (size_t i = 0; i < A.size(); ++i) absA[i] = std::fabs(A[i]);
    for (size_t i = 0; i < B.size(); ++i) absB[i] = std::fabs(B[i]);
    kernels::ref::gemm(false, false, M, N, K, absA.data(), K, absB.data(), N, mag.data(), N, false, nullptr);
    std::vector<float> pre_ref = sum, no_bias(size_t(N), 0.0f);  // gelu of the f32 sum, bias already in it
    kernels::ref::bias_gelu_forward(act_want.data(), pre_ref.data(), no_bias.data(), M, N);
    DeviceBuffer<bf16> dA(A16), dB(B16), dpre(sum.size()), dact(sum.size());
    DeviceBuffer<float> dbias(bias);
    kernels::gemm_bias_gelu_bf16(M, N, K, dA.get(), dB.get(), dbias.get(), dpre.get(), dact.get());
    ASSERT_TRUE(kernels::cuda::last_error("gemm_bias_gelu_bf16").is_ok());
    const std::vector<bf16> pre = dpre.host(), act = dact.host();
    for (size_t i = 0; i < sum.size(); ++i) {
      const double sum_err = 0x1p-22 * K * (mag[i] + std::fabs(bias[i % size_t(N)])) + 1e-30;
      ASSERT_NEAR(to_f32(pre[i]), sum[i], sum_err + 0x1p-8 * std::fabs(sum[i])) << "pre, entry " << i;
      ASSERT_NEAR(to_f32(act[i]), act_want[i], 1.13 * sum_err + 0x1p-8 * std::fabs(act_want[i]) + 1e-3)
          << "act, entry " << i;
    }
  }
}

// Its backward through cuBLASLt's DGELU_BGRAD (kernels::gemm_dgelu_bf16):
// dpre = bf16((dy W^T) * gelu'(pre)) and dbias = the column sums of the
// unrounded products, against the reference's f32 GEMM of the same bf16
// operands and its GELU backward. Where N is not a multiple of 8 it does not
// fuse and does nothing (the caller's kernels run instead).
TEST(CudaGemm, TheFusedGeluBackwardMatchesTheReference) {
  REQUIRE_GPU();
  kernels::DeviceScope gpu(Device::cuda(0));
  Rng rng(testing::test_seed(), 0xd6e1u);
  for (auto [M, N, K] : {std::tuple{1, 8, 1}, std::tuple{17, 64, 33}, std::tuple{37, 1024, 256},
                         std::tuple{128, 3072, 768}, std::tuple{64, 4104, 100}, std::tuple{16, 33, 64}}) {
    SCOPED_TRACE(std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K));
    auto dy = testing::random_vector(rng, size_t(M) * K), W = testing::random_vector(rng, size_t(N) * K);
    auto pre = testing::random_vector(rng, size_t(M) * N, -3.0f, 3.0f);
    std::vector<bf16> dy16(dy.size()), W16(W.size()), pre16(pre.size());
    for (size_t i = 0; i < dy.size(); ++i) dy16[i] = to_bf16(dy[i]), dy[i] = to_f32(dy16[i]);
    for (size_t i = 0; i < W.size(); ++i) W16[i] = to_bf16(W[i]), W[i] = to_f32(W16[i]);
    for (size_t i = 0; i < pre.size(); ++i) pre16[i] = to_bf16(pre[i]), pre[i] = to_f32(pre16[i]);
    std::vector<float> dact(size_t(M) * N), mag(dact.size()), want(dact.size()), dbias_want(size_t(N), 0.0f);
    kernels::ref::gemm(false, true, M, N, K, dy.data(), K, W.data(), K, dact.data(), N, false, nullptr);
    std::vector<float> absdy(dy.size()), absW(W.size());
    for (size_t i = 0; i < dy.size(); ++i) absdy[i] = std::fabs(dy[i]);
    for (size_t i = 0; i < W.size(); ++i) absW[i] = std::fabs(W[i]);
    kernels::ref::gemm(false, true, M, N, K, absdy.data(), K, absW.data(), K, mag.data(), N, false, nullptr);
    kernels::ref::bias_gelu_backward(want.data(), dbias_want.data(), dact.data(), pre.data(), M, N);
    DeviceBuffer<bf16> ddy(dy16), dW(W16), dpre_in(pre16), dpre(dact.size());
    DeviceBuffer<float> dbias(std::vector<float>(size_t(N), -7.0f));  // written, not added to
    const bool fused = kernels::gemm_dgelu_bf16(M, N, K, ddy.get(), dW.get(), dpre_in.get(), dpre.get(), dbias.get());
    ASSERT_TRUE(kernels::cuda::last_error("gemm_dgelu_bf16").is_ok());
    // Rows of dy and W whose bf16 length is not a multiple of 16 bytes (K % 8)
    // may have no epilogue kernel: either way is right there, and a refusal
    // must leave everything as it was. The model's shapes (K a multiple of 8)
    // must fuse, or the feature does not exist on this GPU.
    if (N % 8 || (K % 8 && !fused)) {
      if (N % 8) {
        EXPECT_FALSE(fused) << "the auxiliary matrix's leading dimension must be a multiple of 8";
      }
      EXPECT_EQ(dbias.host(), std::vector<float>(size_t(N), -7.0f)) << "a refused problem wrote its bias";
      continue;
    }
    ASSERT_TRUE(fused) << "cuBLASLt has no DGELU_BGRAD algorithm here: the MLP's backward runs unfused";
    const std::vector<bf16> got = dpre.host();
    const std::vector<float> gb = dbias.host();
    std::vector<double> bias_err(size_t(N), 0.0);
    for (size_t i = 0; i < dact.size(); ++i) {
      // The f32 sum's error, through a GELU derivative of at most 1.13.
      const double err = 1.13 * 0x1p-22 * K * mag[i] + 1e-5 * std::fabs(want[i]) + 1e-30;
      ASSERT_NEAR(to_f32(got[i]), want[i], err + 0x1p-8 * std::fabs(want[i])) << "dpre, entry " << i;
      bias_err[i % size_t(N)] += err + 0x1p-22 * M * std::fabs(want[i]);
    }
    for (int c = 0; c < N; ++c) ASSERT_NEAR(gb[size_t(c)], dbias_want[size_t(c)], bias_err[size_t(c)]) << "dbias " << c;
  }
}

}  // namespace
}  // namespace crucible
