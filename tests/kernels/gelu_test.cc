// Fast bias + GELU forward and backward (kernels/isa/gelu.cc) against the
// double reference on every ISA this CPU runs. Pre-activations span [-6, 6]
// so tanh saturates on both sides; the backward runs both out of place and
// with dpre aliasing dout, as the contract allows.
#include <gtest/gtest.h>

#include "core/threads.h"
#include "kernels/reference.h"
#include "support/kernel_harness.h"

namespace crucible {
namespace {

using testing::Compare;

const std::vector<testing::KernelShape> kShapes = {{1, 1},   {1, 7},    {7, 33},   {33, 100},
                                                   {5, 257}, {64, 768}, {17, 3072}};

TEST(BiasGelu, ForwardMatchesReference) {
  testing::check_kernel(
      "bias_gelu_forward", kShapes,
      [](const kernels::KernelTable& k, const testing::KernelShape& s, Rng& rng) {
        const int N = s[0], C = s[1];
        const size_t n = size_t(N) * C;
        auto pre = testing::random_vector(rng, n, -5.0f, 5.0f), pre_ref = pre;
        auto bias = testing::random_vector(rng, C);
        std::vector<float> out(n), out_ref(n);
        k.bias_gelu_forward(out.data(), pre.data(), bias.data(), N, C);
        kernels::ref::bias_gelu_forward(out_ref.data(), pre_ref.data(), bias.data(), N, C);
        return std::vector<Compare>{{"pre", pre, pre_ref, 0, 0},  // pre + bias is exact
                                    {"out", out, out_ref, 1e-5, 1e-4}};
      });
}

TEST(BiasGelu, BackwardAccumulatesBiasAndMatchesReference) {
  testing::check_kernel(
      "bias_gelu_backward", kShapes,
      [](const kernels::KernelTable& k, const testing::KernelShape& s, Rng& rng) {
        const int N = s[0], C = s[1];
        const size_t n = size_t(N) * C;
        auto pre = testing::random_vector(rng, n, -6.0f, 6.0f);
        auto dout = testing::random_vector(rng, n);
        // dbias starts non-zero: the contract is "+=".
        auto dbias0 = testing::random_vector(rng, C);
        std::vector<float> dpre(n), dpre_ref(n), dbias = dbias0, dbias_ref = dbias0;
        k.bias_gelu_backward(dpre.data(), dbias.data(), dout.data(), pre.data(), N, C);
        kernels::ref::bias_gelu_backward(dpre_ref.data(), dbias_ref.data(), dout.data(), pre.data(),
                                         N, C);
        // In place: dpre aliases dout.
        auto inplace = dout;
        std::vector<float> dbias_inplace = dbias0;
        k.bias_gelu_backward(inplace.data(), dbias_inplace.data(), inplace.data(), pre.data(), N,
                             C);
        return std::vector<Compare>{{"dpre", dpre, dpre_ref, 1e-5, 1e-4},
                                    {"dbias", dbias, dbias_ref, 1e-5, 1e-4},
                                    {"dpre(in place)", inplace, dpre, 0, 0},
                                    {"dbias(in place)", dbias_inplace, dbias, 0, 0}};
      });
}

// dbias is summed over fixed row blocks added in block order, so the bits
// must not depend on the thread count.
TEST(BiasGelu, BackwardBitwiseIndependentOfThreadCount) {
  const int N = 101, C = 300;
  const size_t n = size_t(N) * C;
  Rng rng(testing::test_seed(), 51);
  auto pre = testing::random_vector(rng, n, -3.0f, 3.0f), dout = testing::random_vector(rng, n);
  const int saved = num_threads();
  for (const kernels::KernelTable* k : kernels::supported_tables()) {
    std::vector<float> dpre[2], dbias[2];
    for (int r = 0; r < 2; ++r) {
      set_num_threads(r == 0 ? 1 : 3);
      dpre[r].resize(n);
      dbias[r].assign(C, 0.25f);
      k->bias_gelu_backward(dpre[r].data(), dbias[r].data(), dout.data(), pre.data(), N, C);
    }
    EXPECT_EQ(dpre[0], dpre[1]) << k->isa;
    EXPECT_EQ(dbias[0], dbias[1]) << k->isa;
  }
  set_num_threads(saved);
}

}  // namespace
}  // namespace crucible
