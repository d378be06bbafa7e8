// Fast softmax + cross-entropy (kernels/isa/cross_entropy.cc) against the
// double reference on every ISA this CPU runs. Shapes (N, V) cover V = 1,
// V not a multiple of the vector width or of the online-softmax chunk, and
// GPT-2's padded vocabulary 50304. The last row of every batch with N > 1 is
// ignored (target -1). Both modes are checked: loss only (logits untouched)
// and loss plus gradient in place.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/reference.h"
#include "support/kernel_harness.h"

namespace crucible {
namespace {

using testing::Compare;

std::vector<Compare> run_cross_entropy(const kernels::KernelTable& k, const std::vector<float>& x,
                                       Rng& rng, int N, int V) {
  std::vector<int32_t> targets(N);
  for (auto& t : targets) t = int32_t(rng.next_u32() % uint32_t(V));
  if (N > 1) targets[N - 1] = -1;
  std::vector<Compare> cmp;
  for (float dscale : {0.0f, 1.0f / N}) {
    std::string tag = dscale == 0 ? "(loss only)" : "(with grad)";
    auto logits = x, logits_ref = x;
    std::vector<float> losses(N, 9.0f), losses_ref(N);
    k.softmax_cross_entropy(losses.data(), logits.data(), targets.data(), N, V, dscale);
    kernels::ref::softmax_cross_entropy(losses_ref.data(), logits_ref.data(), targets.data(), N, V,
                                        dscale);
    cmp.push_back({"losses" + tag, losses, losses_ref, 1e-5, 1e-5});
    // Without a gradient the logits must come back bit for bit.
    if (dscale == 0) cmp.push_back({"logits" + tag, logits, x, 0, 0});
    // Gradient entries are ~1/(N V): absolute tolerance scaled to match.
    else
      cmp.push_back({"dlogits" + tag, logits, logits_ref, 1e-7 / N, 1e-4});
    for (float l : losses) EXPECT_TRUE(std::isfinite(l)) << tag;
  }
  return cmp;
}

TEST(SoftmaxCrossEntropy, LossAndGradientMatchReference) {
  testing::check_kernel(
      "softmax_cross_entropy",
      {{1, 1}, {1, 7}, {3, 33}, {7, 100}, {5, 257}, {3, 1000}, {4, 50304}, {2, 50257}},
      [](const kernels::KernelTable& k, const testing::KernelShape& s, Rng& rng) {
        const int N = s[0], V = s[1];
        return run_cross_entropy(k, testing::random_vector(rng, size_t(N) * V, -4.0f, 4.0f), rng, N,
                                 V);
      });
}

// Logits up to ~600 that keep rising along the row: exp overflows unless the
// running max is rescaled correctly at every chunk.
TEST(SoftmaxCrossEntropy, LargeRisingLogitsStayFiniteAndMatch) {
  testing::check_kernel("softmax_cross_entropy_large", {{2, 37}, {3, 1000}, {2, 50304}},
                        [](const kernels::KernelTable& k, const testing::KernelShape& s, Rng& rng) {
                          const int N = s[0], V = s[1];
                          auto x = testing::random_vector(rng, size_t(N) * V, -3.0f, 3.0f);
                          for (int n = 0; n < N; ++n)
                            for (int v = 0; v < V; ++v) x[size_t(n) * V + v] += 600.0f * v / V;
                          return run_cross_entropy(k, x, rng, N, V);
                        });
}

}  // namespace
}  // namespace crucible
