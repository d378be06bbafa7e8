// Fast token + position embedding (kernels/isa/embedding.cc) against the
// reference on every ISA this CPU runs. Each output float receives exactly
// the reference's additions in the reference's order (forward: one add;
// backward: tokens in order), so the results must match bit for bit, also
// when many positions share a token (V much smaller than B*T).
#include <gtest/gtest.h>

#include "core/threads.h"
#include "kernels/reference.h"
#include "support/kernel_harness.h"

namespace crucible {
namespace {

using testing::Compare;

std::vector<int32_t> random_tokens(Rng& rng, size_t n, int V) {
  std::vector<int32_t> idx(n);
  for (auto& t : idx) t = int32_t(rng.next_u32() % uint32_t(V));
  return idx;
}

// Shapes are (B, T, C, V).
TEST(Embedding, ForwardAndBackwardMatchReferenceExactly) {
  testing::check_kernel(
      "embedding",
      {{1, 1, 1, 1}, {2, 7, 33, 5}, {3, 33, 100, 257}, {1, 257, 7, 3}, {4, 64, 768, 50}},
      [](const kernels::KernelTable& k, const testing::KernelShape& s, Rng& rng) {
        const int B = s[0], T = s[1], C = s[2], V = s[3];
        const size_t n = size_t(B) * T * C;
        auto idx = random_tokens(rng, size_t(B) * T, V);
        auto wte = testing::random_vector(rng, size_t(V) * C);
        auto wpe = testing::random_vector(rng, size_t(T) * C);
        auto dout = testing::random_vector(rng, n);
        // Gradients start non-zero: the contract is "+=".
        auto dwte = testing::random_vector(rng, wte.size()), dwte_ref = dwte;
        auto dwpe = testing::random_vector(rng, wpe.size()), dwpe_ref = dwpe;
        std::vector<float> out(n, 7.0f), out_ref(n);
        k.embedding_forward(out.data(), idx.data(), wte.data(), wpe.data(), B, T, C);
        k.embedding_backward(dwte.data(), dwpe.data(), dout.data(), idx.data(), 0, V, B, T, C);
        kernels::ref::embedding_forward(out_ref.data(), idx.data(), wte.data(), wpe.data(), B, T,
                                        C);
        kernels::ref::embedding_backward(dwte_ref.data(), dwpe_ref.data(), dout.data(), idx.data(), 0, V,
                                         B, T, C);
        return std::vector<Compare>{{"out", out, out_ref, 0, 0},
                                    {"dwte", dwte, dwte_ref, 0, 0},
                                    {"dwpe", dwpe, dwpe_ref, 0, 0}};
      });
}

// A tensor-parallel rank's shard of the vocabulary, rows [lo, hi): the
// lookup zeroes the rows it does not hold, the backward adds only into the
// rows it holds (or, without dwte, only into dwpe); positions from any row.
// Shapes are (B, T, C, V, lo, hi, first).
TEST(Embedding, VocabularyShardsMatchReferenceExactly) {
  testing::check_kernel(
      "embedding_shard",
      {{1, 1, 1, 4, 0, 2, 0}, {2, 7, 33, 50, 10, 31, 3}, {3, 33, 100, 257, 200, 257, 40}, {4, 64, 768, 50, 0, 25, 64}},
      [](const kernels::KernelTable& k, const testing::KernelShape& s, Rng& rng) {
        const int B = s[0], T = s[1], C = s[2], V = s[3], lo = s[4], hi = s[5], first = s[6];
        const int N = B * T, Vl = hi - lo;
        auto idx = random_tokens(rng, size_t(N), V);
        auto wte = testing::random_vector(rng, size_t(Vl) * C);
        auto wpe = testing::random_vector(rng, size_t(T) * C);
        auto dout = testing::random_vector(rng, size_t(N) * C);
        auto dwte = testing::random_vector(rng, wte.size()), dwte_ref = dwte;
        auto dwpe = testing::random_vector(rng, wpe.size()), dwpe_ref = dwpe, dwpe_only = dwpe, dwpe_only_ref = dwpe;
        std::vector<float> dwte_only = dwte, dwte_only_ref = dwte;
        std::vector<float> out(size_t(N) * C, 7.0f), out_ref(out.size());
        k.embedding_lookup(out.data(), idx.data(), wte.data(), lo, hi, N, C);
        k.add_positions(out.data(), wpe.data(), first, N, T, C);
        k.embedding_backward(dwte.data(), dwpe.data(), dout.data(), idx.data(), lo, hi, B, T, C);
        k.embedding_backward(nullptr, dwpe_only.data(), dout.data(), idx.data(), lo, hi, B, T, C);
        k.embedding_backward(dwte_only.data(), nullptr, dout.data(), idx.data(), lo, hi, B, T, C);  // embedding rows
        kernels::ref::embedding_lookup(out_ref.data(), idx.data(), wte.data(), lo, hi, N, C);
        kernels::ref::add_positions(out_ref.data(), wpe.data(), first, N, T, C);
        kernels::ref::embedding_backward(dwte_ref.data(), dwpe_ref.data(), dout.data(), idx.data(), lo, hi, B, T, C);
        kernels::ref::embedding_backward(nullptr, dwpe_only_ref.data(), dout.data(), idx.data(), lo, hi, B, T, C);
        kernels::ref::embedding_backward(dwte_only_ref.data(), nullptr, dout.data(), idx.data(), lo, hi, B, T, C);
        // Rows outside the shard look up zeros (plus their position).
        for (int n = 0; n < N; ++n)
          if (idx[size_t(n)] < lo || idx[size_t(n)] >= hi) {
            EXPECT_EQ(out_ref[size_t(n) * C], wpe[size_t((first + n) % T) * C]);
          }
        return std::vector<Compare>{{"out", out, out_ref, 0, 0},
                                    {"dwte", dwte, dwte_ref, 0, 0},
                                    {"dwpe", dwpe, dwpe_ref, 0, 0},
                                    {"dwpe without dwte", dwpe_only, dwpe_only_ref, 0, 0},
                                    {"dwte without dwpe", dwte_only, dwte_only_ref, 0, 0},
                                    {"dwte alone adds what it adds beside dwpe", dwte_only, dwte_ref, 0, 0}};
      });
}

// Two tokens shared by 8 x 50 positions: threads own channel slices, so the
// bits must not depend on the thread count.
TEST(Embedding, BackwardBitwiseIndependentOfThreadCount) {
  const int B = 8, T = 50, C = 200, V = 2;
  Rng rng(testing::test_seed(), 31);
  auto idx = random_tokens(rng, size_t(B) * T, V);
  auto dout = testing::random_vector(rng, size_t(B) * T * C);
  const int saved = num_threads();
  for (const kernels::KernelTable* k : kernels::supported_tables()) {
    std::vector<float> dwte[2], dwpe[2];
    for (int r = 0; r < 2; ++r) {
      set_num_threads(r == 0 ? 1 : 3);
      dwte[r].assign(size_t(V) * C, 0.5f);
      dwpe[r].assign(size_t(T) * C, 0.5f);
      k->embedding_backward(dwte[r].data(), dwpe[r].data(), dout.data(), idx.data(), 0, V, B, T, C);
    }
    EXPECT_EQ(dwte[0], dwte[1]) << k->isa;
    EXPECT_EQ(dwpe[0], dwpe[1]) << k->isa;
  }
  set_num_threads(saved);
}

}  // namespace
}  // namespace crucible
