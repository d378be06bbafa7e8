// Fast causal attention (kernels/isa/attention.cc) against the double
// reference, on every ISA this CPU runs. Shapes (B,T,C,NH) cover T = 1, T not
// a multiple of the tile (32) or of the vector width, hs in {8, 12, 32, 64}.
#include <gtest/gtest.h>

#include <cmath>

#include "core/threads.h"
#include "kernels/reference.h"
#include "support/kernel_harness.h"

namespace crucible {
namespace {

using testing::Compare;

// Runs forward and backward of the table's kernel and the reference on the
// same inputs: qkv in [-mag, mag], dout in [-1, 1].
std::vector<Compare> run_attention(const kernels::KernelTable& k, const testing::KernelShape& s,
                                   Rng& rng, float mag, double atol, double rtol) {
  const int B = s[0], T = s[1], C = s[2], NH = s[3];
  const size_t n = size_t(B) * T * C;
  auto qkv = testing::random_vector(rng, 3 * n, -mag, mag);
  auto dout = testing::random_vector(rng, n);
  std::vector<float> out(n), lse(size_t(B) * NH * T), out_ref(n), lse_ref(lse.size());
  // dqkv starts as garbage: the contract is "=", not "+=".
  auto dqkv = testing::random_vector(rng, 3 * n, 5.0f, 9.0f);
  std::vector<float> dqkv_ref(3 * n);
  k.attention_forward(out.data(), lse.data(), qkv.data(), B, T, C, NH);
  k.attention_backward(dqkv.data(), dout.data(), qkv.data(), out.data(), lse.data(), B, T, C, NH);
  kernels::ref::attention_forward(out_ref.data(), lse_ref.data(), qkv.data(), B, T, C, NH);
  kernels::ref::attention_backward(dqkv_ref.data(), dout.data(), qkv.data(), out_ref.data(),
                                   lse_ref.data(), B, T, C, NH);
  return {{"out", out, out_ref, atol, rtol},
          {"lse", lse, lse_ref, atol, rtol},
          {"dqkv", dqkv, dqkv_ref, atol, rtol}};
}

TEST(Attention, ForwardAndBackwardMatchReference) {
  testing::check_kernel("attention",
                        {{1, 1, 8, 1},
                         {2, 7, 24, 2},
                         {1, 33, 64, 1},
                         {2, 100, 96, 8},
                         {1, 130, 192, 3},
                         {3, 64, 256, 4},
                         {1, 65, 24, 2}},
                        [](const kernels::KernelTable& k, const testing::KernelShape& s, Rng& rng) {
                          return run_attention(k, s, rng, 1.0f, 2e-5, 2e-4);
                        });
}

// Scores up to ~500 in magnitude: the online softmax's running max must keep
// every exponential in range, and the result must still match.
TEST(Attention, LargeScoresStayFiniteAndMatch) {
  testing::check_kernel("attention_large", {{2, 7, 24, 2}, {1, 100, 128, 2}, {2, 70, 192, 3}},
                        [](const kernels::KernelTable& k, const testing::KernelShape& s, Rng& rng) {
                          auto cmp = run_attention(k, s, rng, 8.0f, 1e-4, 1e-3);
                          for (const Compare& c : cmp)
                            for (float x : c.got) EXPECT_TRUE(std::isfinite(x)) << c.what;
                          return cmp;
                        });
}

// Each (b, h) is owned by one thread and dQ is summed in key-tile order, so
// the bits must not depend on the thread count.
TEST(Attention, BitwiseIndependentOfThreadCount) {
  const int B = 2, T = 77, C = 96, NH = 3;
  const size_t n = size_t(B) * T * C;
  Rng rng(testing::test_seed(), 91);
  auto qkv = testing::random_vector(rng, 3 * n);
  auto dout = testing::random_vector(rng, n);
  const int saved = num_threads();
  for (const kernels::KernelTable* k : kernels::supported_tables()) {
    std::vector<float> out[2], lse[2], dqkv[2];
    for (int r = 0; r < 2; ++r) {
      set_num_threads(r == 0 ? 1 : 3);
      out[r].resize(n);
      lse[r].resize(size_t(B) * NH * T);
      dqkv[r].resize(3 * n);
      k->attention_forward(out[r].data(), lse[r].data(), qkv.data(), B, T, C, NH);
      k->attention_backward(dqkv[r].data(), dout.data(), qkv.data(), out[r].data(), lse[r].data(),
                            B, T, C, NH);
    }
    EXPECT_EQ(out[0], out[1]) << k->isa;
    EXPECT_EQ(lse[0], lse[1]) << k->isa;
    EXPECT_EQ(dqkv[0], dqkv[1]) << k->isa;
  }
  set_num_threads(saved);
}

}  // namespace
}  // namespace crucible
