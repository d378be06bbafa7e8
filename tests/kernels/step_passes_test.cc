// The step's small passes (kernels/isa/step_passes.cc) against the reference
// on every ISA this CPU runs, bit for bit: each is the reference's arithmetic
// in the reference's order (the loss's sum in index order, the ranks'
// statistics combined in rank order), so every rank and every thread count
// gets the same bits.
#include <gtest/gtest.h>

#include <cmath>

#include "core/threads.h"
#include "kernels/reference.h"
#include "support/kernel_harness.h"

namespace crucible {
namespace {

using testing::Compare;

// Shapes are (n).
TEST(StepPasses, AddFillCopyAndMeanMatchReferenceExactly) {
  testing::check_kernel(
      "step_passes", {{1}, {7}, {1000}, {40000}, {100003}},
      [](const kernels::KernelTable& k, const testing::KernelShape& s, Rng& rng) {
        const size_t n = size_t(s[0]);
        auto a = testing::random_vector(rng, n), b = testing::random_vector(rng, n);
        std::vector<float> out(n, 3.0f), out_ref(n), filled(n, 1.0f), copied(n, 0.0f);
        k.add(out.data(), a.data(), b.data(), n);
        kernels::ref::add(out_ref.data(), a.data(), b.data(), n);
        k.fill(filled.data(), n, -2.5f);
        k.copy_bytes(copied.data(), a.data(), n * sizeof(float));
        // In place (out aliases a), as a residual add may run.
        std::vector<float> in_place = a;
        k.add(in_place.data(), in_place.data(), b.data(), n);
        // The loss's mean, added to what is there: the sum in index order, over
        // n, rounded to float (the reference's plain loop, bit for bit).
        double mean = 1.5, mean_ref = 1.5, plain = 0;
        k.add_mean(&mean, a.data(), n);
        kernels::ref::add_mean(&mean_ref, a.data(), n);
        for (float x : a) plain += x;
        EXPECT_EQ(mean_ref, 1.5 + double(float(plain / double(n))));
        const std::vector<float> sums = {float(mean - mean_ref)};
        return std::vector<Compare>{{"add", out, out_ref, 0, 0},
                                    {"add in place", in_place, out_ref, 0, 0},
                                    {"fill", filled, std::vector<float>(n, -2.5f), 0, 0},
                                    {"copy", copied, a, 0, 0},
                                    {"mean - reference", sums, {0.0f}, 0, 0}};
      });
}

// Shapes are (N, V, lo, hi, R): N rows, V-wide vocabulary, this rank's
// columns [lo, hi), R ranks' statistics.
TEST(StepPasses, VocabularyParallelPiecesMatchReferenceExactly) {
  testing::check_kernel(
      "vocab_parallel_xent",
      {{1, 4, 0, 2, 2}, {17, 50, 10, 31, 3}, {64, 1000, 500, 1000, 2}, {300, 257, 0, 65, 4}},
      [](const kernels::KernelTable& k, const testing::KernelShape& s, Rng& rng) {
        const int N = s[0], V = s[1], lo = s[2], hi = s[3], R = s[4], Vl = hi - lo;
        const size_t rows = size_t(N);
        std::vector<int32_t> targets(rows);
        for (auto& t : targets)
          t = int32_t(rng.next_u32() % uint32_t(V + 1)) - 1;  // -1: an ignored row
        auto logits = testing::random_vector(rng, size_t(N) * Vl, -8, 8);
        std::vector<bf16> logits16(logits.size());
        for (size_t i = 0; i < logits.size(); ++i) logits16[i] = to_bf16(logits[i]);
        std::vector<float> x(rows, 9.0f), x_ref(rows), x16(rows, 9.0f), x16_ref(rows);
        k.target_logits(x.data(), logits.data(), targets.data(), lo, hi, N);
        kernels::ref::target_logits(x_ref.data(), logits.data(), targets.data(), lo, hi, N);
        k.target_logits_bf16(x16.data(), logits16.data(), targets.data(), lo, hi, N);
        kernels::ref::target_logits_bf16(x16_ref.data(), logits16.data(), targets.data(), lo, hi,
                                         N);
        // Every rank's [max | log_sum | target logit]; the target's logit is
        // non-zero on one rank at most, as the ranks' shards are disjoint.
        std::vector<float> all(size_t(R) * 3 * N);
        for (int r = 0; r < R; ++r)
          for (int n = 0; n < N; ++n) {
            float* part = all.data() + size_t(r) * 3 * N;
            part[n] = rng.uniform() * 16 - 8;
            part[N + n] = rng.uniform() * 5;
            part[2 * N + n] =
                targets[size_t(n)] >= 0 && targets[size_t(n)] % R == r ? part[n] - 1.0f : 0.0f;
          }
        std::vector<float> mx(rows), ls(rows), loss(rows), mx_ref(rows), ls_ref(rows),
            loss_ref(rows);
        k.combine_vocab_stats(mx.data(), ls.data(), loss.data(), all.data(), targets.data(), R, N);
        kernels::ref::combine_vocab_stats(mx_ref.data(), ls_ref.data(), loss_ref.data(), all.data(),
                                          targets.data(), R, N);
        for (int n = 0; n < N; ++n)
          if (targets[size_t(n)] < 0) {
            EXPECT_EQ(loss[size_t(n)], 0.0f);
          }
        return std::vector<Compare>{{"target logits", x, x_ref, 0, 0},
                                    {"target logits bf16", x16, x16_ref, 0, 0},
                                    {"max", mx, mx_ref, 0, 0},
                                    {"log_sum", ls, ls_ref, 0, 0},
                                    {"losses", loss, loss_ref, 0, 0}};
      });
}

// The bf16 wire's passes (parallel/data_parallel.h). Shapes are (n, W): n
// gradients, W ranks' copies. Bit for bit: the sum runs in rank order in f32
// and rounds once, as the reference does; the widening is exact.
TEST(StepPasses, Bf16WirePassesMatchReferenceExactly) {
  testing::check_kernel(
      "bf16_wire", {{1, 1}, {17, 2}, {1000, 3}, {40000, 4}, {100003, 2}},
      [](const kernels::KernelTable& k, const testing::KernelShape& s, Rng& rng) {
        const size_t n = size_t(s[0]);
        const int W = s[1];
        const auto values = testing::random_vector(rng, size_t(W) * n, -4, 4);
        std::vector<bf16> pieces(values.size());
        for (size_t i = 0; i < values.size(); ++i) pieces[i] = to_bf16(values[i]);
        std::vector<float> sum(n, 7.0f), sum_ref(n), kept(n, 7.0f), kept_ref(n), wide(n, 7.0f),
            wide_ref(n);
        std::vector<bf16> rounded(n), rounded_ref(n);
        k.sum_bf16_pieces(sum.data(), rounded.data(), pieces.data(), W, n);
        kernels::ref::sum_bf16_pieces(sum_ref.data(), rounded_ref.data(), pieces.data(), W, n);
        k.sum_bf16_pieces(kept.data(), nullptr, pieces.data(), W, n);  // zero 2: unrounded
        kernels::ref::sum_bf16_pieces(kept_ref.data(), nullptr, pieces.data(), W, n);
        k.convert_to_f32(wide.data(), rounded.data(), n);
        kernels::ref::convert_to_f32(wide_ref.data(), rounded_ref.data(), n);
        size_t differ = 0;
        for (size_t i = 0; i < n; ++i) differ += rounded[i].bits != rounded_ref[i].bits;
        EXPECT_EQ(differ, 0u) << k.isa << " n " << n << " W " << W;
        // What every rank keeps is what it sent: the rounded sum, widened.
        EXPECT_EQ(sum, wide);
        return std::vector<Compare>{{"sum, rounded", sum, sum_ref, 0, 0},
                                    {"sum, unrounded", kept, kept_ref, 0, 0},
                                    {"widened", wide, wide_ref, 0, 0}};
      });
}

}  // namespace
}  // namespace crucible
