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
        k.embedding_backward(dwte.data(), dwpe.data(), dout.data(), idx.data(), B, T, C);
        kernels::ref::embedding_forward(out_ref.data(), idx.data(), wte.data(), wpe.data(), B, T,
                                        C);
        kernels::ref::embedding_backward(dwte_ref.data(), dwpe_ref.data(), dout.data(), idx.data(),
                                         B, T, C);
        return std::vector<Compare>{{"out", out, out_ref, 0, 0},
                                    {"dwte", dwte, dwte_ref, 0, 0},
                                    {"dwpe", dwpe, dwpe_ref, 0, 0}};
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
      k->embedding_backward(dwte[r].data(), dwpe[r].data(), dout.data(), idx.data(), B, T, C);
    }
    EXPECT_EQ(dwte[0], dwte[1]) << k->isa;
    EXPECT_EQ(dwpe[0], dwpe[1]) << k->isa;
  }
  set_num_threads(saved);
}

}  // namespace
}  // namespace crucible
