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

// The vocabulary-parallel halves: logits split by columns into `shards`
// pieces of unequal width (V not divisible by the shard count), each
// shard's row statistics combined as nn/cross_entropy.cc does, then each
// shard's gradient: together the fused reference's losses and gradient.
// Targets fall in every shard, and the last row is ignored.
TEST(SoftmaxCrossEntropy, VocabShardsCombineToTheWholeRow) {
  testing::check_kernel(
      "logsumexp_rows+softmax_xent_backward",
      {{1, 2, 2}, {3, 33, 2}, {5, 257, 3}, {4, 1001, 4}, {2, 50257, 2}},
      [](const kernels::KernelTable& k, const testing::KernelShape& s, Rng& rng) -> std::vector<Compare> {
        const int N = s[0], V = s[1], R = s[2];
        const float dscale = 1.0f / N;
        auto x = testing::random_vector(rng, size_t(N) * V, -4.0f, 4.0f);
        std::vector<int32_t> targets(N);
        for (auto& t : targets) t = int32_t(rng.next_u32() % uint32_t(V));
        if (N > 1) targets[N - 1] = -1;
        auto ref = x;
        std::vector<float> losses_ref(N);
        kernels::ref::softmax_cross_entropy(losses_ref.data(), ref.data(), targets.data(), N, V, dscale);
        // Shard r holds columns [lo_r, hi_r), the first V % R one wider.
        std::vector<int> lo(R + 1);
        for (int r = 0; r <= R; ++r) lo[r] = r * (V / R) + std::min(r, V % R);
        std::vector<std::vector<float>> shard(R), mx(R, std::vector<float>(N)), ls(R, std::vector<float>(N));
        for (int r = 0; r < R; ++r) {
          const int w = lo[r + 1] - lo[r];
          for (int n = 0; n < N; ++n)
            shard[r].insert(shard[r].end(), x.begin() + size_t(n) * V + lo[r], x.begin() + size_t(n) * V + lo[r + 1]);
          k.logsumexp_rows(mx[r].data(), ls[r].data(), shard[r].data(), N, w);
          std::vector<float> m_ref(N), l_ref(N);
          kernels::ref::logsumexp_rows(m_ref.data(), l_ref.data(), shard[r].data(), N, w);
          for (int n = 0; n < N; ++n) {
            EXPECT_EQ(mx[r][n], m_ref[n]) << "shard " << r << " row " << n;
            EXPECT_NEAR(ls[r][n], l_ref[n], 1e-5 * std::max(1.0f, std::fabs(l_ref[n]))) << "shard " << r;
          }
        }
        std::vector<float> M(N), LS(N), losses(N), grad(size_t(N) * V);
        for (int n = 0; n < N; ++n) {
          M[n] = -INFINITY;
          for (int r = 0; r < R; ++r) M[n] = std::max(M[n], mx[r][n]);
          double S = 0;
          for (int r = 0; r < R; ++r) S += std::exp(double(ls[r][n]) + (mx[r][n] - M[n]));
          LS[n] = float(std::log(S));
          losses[n] = targets[n] < 0 ? 0.0f : LS[n] - (x[size_t(n) * V + targets[n]] - M[n]);
        }
        for (int r = 0; r < R; ++r) {
          const int w = lo[r + 1] - lo[r];
          auto naive = shard[r];
          kernels::ref::softmax_xent_backward(naive.data(), M.data(), LS.data(), targets.data(), lo[r], N, w, dscale);
          k.softmax_xent_backward(shard[r].data(), M.data(), LS.data(), targets.data(), lo[r], N, w, dscale);
          size_t bad = 0;
          for (size_t i = 0; i < naive.size(); ++i)
            bad += std::fabs(shard[r][i] - naive[i]) > 1e-7 / N + 1e-4 * std::fabs(naive[i]);
          EXPECT_EQ(bad, 0u) << "shard " << r << ": entries off the naive softmax_xent_backward";
          for (int n = 0; n < N; ++n)
            std::copy_n(shard[r].begin() + size_t(n) * w, w, grad.begin() + size_t(n) * V + lo[r]);
        }
        return std::vector<Compare>{{"losses", losses, losses_ref, 1e-5, 1e-5},
                                    {"dlogits", grad, ref, 1e-7 / N, 1e-4}};
      });
}

}  // namespace
}  // namespace crucible
