// The bf16 variants of softmax + cross-entropy (whole rows and vocabulary
// shards), the f32 -> bf16 conversion, and AdamW's bf16 copy and bf16
// moments, against their references on every ISA this CPU runs; tolerances
// and the shared checks: support/bf16_checks.h (bf16_kernels_test.cc has
// the other kernels).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "core/threads.h"
#include "kernels/reference.h"
#include "support/bf16_checks.h"
#include "support/kernel_harness.h"

namespace crucible {
namespace {

using namespace bf16check;

// ---- softmax + cross-entropy ----

// Random targets, with every third row and the last ignored (targets -1
// and -100: any negative id).
std::vector<int32_t> targets_with_ignored(Rng& rng, int N, int V) {
  std::vector<int32_t> t(N);
  for (int i = 0; i < N; ++i) t[i] = int32_t(rng.next_u32() % uint32_t(V));
  for (int i = 2; i < N; i += 3) t[i] = -1;
  if (N > 1) t[N - 1] = -100;
  return t;
}

TEST(Bf16SoftmaxCrossEntropy, LossAndGradientMatchReference) {
  testing::check_kernel(
      "softmax_cross_entropy_bf16",
      {{1, 1}, {1, 7}, {3, 37}, {7, 100}, {5, 257}, {3, 1001}, {4, 50304}, {2, 50257}},
      [](const kernels::KernelTable& k, const testing::KernelShape& s, Rng& rng) {
        const int N = s[0], V = s[1];
        const auto x = random_bf16(rng, size_t(N) * V, -4.0f, 4.0f);
        const auto targets = targets_with_ignored(rng, N, V);
        std::vector<Compare> cmp;
        for (float dscale : {0.0f, 1.0f / N}) {
          const std::string tag = dscale == 0 ? "(loss only)" : "(with grad)";
          auto logits = x, logits_ref = x;
          std::vector<float> losses(N, 9.0f), losses_ref(N);
          k.softmax_cross_entropy_bf16(losses.data(), logits.data(), targets.data(), N, V, dscale);
          kernels::ref::softmax_cross_entropy_bf16(losses_ref.data(), logits_ref.data(),
                                                   targets.data(), N, V, dscale);
          cmp.push_back({"losses" + tag, losses, losses_ref, 1e-5, 1e-5});
          for (int i = 0; i < N; ++i) {
            EXPECT_TRUE(std::isfinite(losses[i])) << where(k, s) << tag;
            if (targets[i] < 0) {
              EXPECT_EQ(losses[i], 0.0f) << where(k, s) << " ignored row " << i;
            }
          }
          if (dscale == 0) {  // without a gradient the logits come back bit for bit
            expect_same_bits(where(k, s) + " logits" + tag, logits, x);
            continue;
          }
          // Gradient entries are ~1/(N V): the f32 test's absolute tolerance.
          cmp.push_back(
              compare_bf16(where(k, s), "dlogits" + tag, logits, logits_ref, 1e-7 / N, 1e-4));
          size_t nonzero_ignored = 0;  // +0 exactly, not -0 or a tiny value
          for (int i = 0; i < N; ++i)
            for (int v = 0; targets[i] < 0 && v < V; ++v)
              nonzero_ignored += logits[size_t(i) * V + v].bits != 0;
          EXPECT_EQ(nonzero_ignored, 0u) << where(k, s) << ": gradient in ignored rows";
        }
        return cmp;
      });
}

// The vocabulary-parallel halves on bf16 logits: split by columns into R
// shards of unequal width, each shard's statistics combined as
// nn/cross_entropy.cc does, then each shard's gradient with its column
// offset: together the fused reference's losses and gradient.
TEST(Bf16SoftmaxCrossEntropy, VocabShardsCombineToTheWholeRow) {
  testing::check_kernel(
      "logsumexp_rows_bf16+softmax_xent_backward_bf16",
      {{1, 2, 2}, {3, 37, 2}, {5, 257, 3}, {4, 1001, 4}, {3, 50304, 2}},
      [](const kernels::KernelTable& k, const testing::KernelShape& s, Rng& rng) {
        const int N = s[0], V = s[1], R = s[2];
        const float dscale = 1.0f / N;
        const auto x = random_bf16(rng, size_t(N) * V, -4.0f, 4.0f);
        const auto targets = targets_with_ignored(rng, N, V);
        auto whole_ref = x;
        std::vector<float> losses_ref(N);
        kernels::ref::softmax_cross_entropy_bf16(losses_ref.data(), whole_ref.data(),
                                                 targets.data(), N, V, dscale);
        // Shard r holds columns [lo_r, lo_{r+1}), the first V % R one wider.
        std::vector<int> lo(R + 1);
        for (int r = 0; r <= R; ++r) lo[r] = r * (V / R) + std::min(r, V % R);
        std::vector<std::vector<bf16>> shard(R);
        std::vector<std::vector<float>> mx(R, std::vector<float>(N)), ls = mx;
        std::vector<Compare> cmp;
        for (int r = 0; r < R; ++r) {
          const int w = lo[r + 1] - lo[r];
          for (int i = 0; i < N; ++i)
            shard[r].insert(shard[r].end(), x.begin() + size_t(i) * V + lo[r],
                            x.begin() + size_t(i) * V + lo[r + 1]);
          std::vector<float> m_ref(N), l_ref(N);
          k.logsumexp_rows_bf16(mx[r].data(), ls[r].data(), shard[r].data(), N, w);
          kernels::ref::logsumexp_rows_bf16(m_ref.data(), l_ref.data(), shard[r].data(), N, w);
          const std::string tag = "(shard " + std::to_string(r) + ")";
          cmp.push_back({"max" + tag, mx[r], m_ref, 0, 0});  // a max of bf16 values is exact
          cmp.push_back({"log_sum" + tag, ls[r], l_ref, 1e-5, 1e-5});
        }
        std::vector<float> M(N), LS(N), losses(N);
        for (int i = 0; i < N; ++i) {
          M[i] = -INFINITY;
          for (int r = 0; r < R; ++r) M[i] = std::max(M[i], mx[r][i]);
          double S = 0;
          for (int r = 0; r < R; ++r) S += std::exp(double(ls[r][i]) + (mx[r][i] - M[i]));
          LS[i] = float(std::log(S));
          losses[i] =
              targets[i] < 0 ? 0.0f : LS[i] - (to_f32(x[size_t(i) * V + targets[i]]) - M[i]);
        }
        std::vector<bf16> grad(size_t(N) * V);
        for (int r = 0; r < R; ++r) {
          const int w = lo[r + 1] - lo[r];
          auto naive = shard[r];
          kernels::ref::softmax_xent_backward_bf16(naive.data(), M.data(), LS.data(),
                                                   targets.data(), lo[r], N, w, dscale);
          k.softmax_xent_backward_bf16(shard[r].data(), M.data(), LS.data(), targets.data(), lo[r],
                                       N, w, dscale);
          const std::string tag = "(shard " + std::to_string(r) + ")";
          cmp.push_back(
              compare_bf16(where(k, s), "dlogits" + tag, shard[r], naive, 1e-7 / N, 1e-4));
          for (int i = 0; i < N; ++i)
            std::copy_n(shard[r].begin() + size_t(i) * w, w, grad.begin() + size_t(i) * V + lo[r]);
        }
        cmp.push_back({"losses", losses, losses_ref, 1e-5, 1e-5});
        cmp.push_back(
            compare_bf16(where(k, s), "dlogits(whole row)", grad, whole_ref, 1e-7 / N, 1e-4));
        return cmp;
      });
}

// ---- conversion ----

// f32 bit patterns and their correctly rounded bf16 (round to nearest even,
// NaN quieted): the oracle to_bf16 is checked against them too.
struct Rounding {
  uint32_t in;
  uint16_t out;
};
const Rounding kRoundings[] = {
    {0x3f808000, 0x3f80},  // tie, even mantissa: stays
    {0x3f818000, 0x3f82},  // tie, odd mantissa: up to even
    {0xbf808000, 0xbf80},  // negative tie, even
    {0xbf818000, 0xbf82},  // negative tie, odd: away from zero, to even
    {0x3f807fff, 0x3f80},  // just below a tie
    {0x3f808001, 0x3f81},  // just above a tie
    {0x3f7fffff, 0x3f80},  // rounds up into the next binade (0.99999994 -> 1)
    {0x40490fdb, 0x4049},  // pi
    {0xc2f6e979, 0xc2f7},  // -123.456
    {0x00800000, 0x0080},  // smallest normal
    {0x7f7f7fff, 0x7f7f},  // largest float that stays finite
    {0x7f7f8000, 0x7f80},  // tie at the top, odd mantissa: overflows to +inf
    {0x7f7fffff, 0x7f80},  // FLT_MAX -> +inf
    {0xff7fffff, 0xff80},  // -FLT_MAX -> -inf
    {0x7f800000, 0x7f80},  // +inf
    {0xff800000, 0xff80},  // -inf
    {0x00000000, 0x0000},  // +0
    {0x80000000, 0x8000},  // -0
    {0x7fc00000, 0x7fc0},  // quiet NaN
    {0xffc00000, 0xffc0},  // negative quiet NaN
    {0x7f800001, 0x7fc0},  // signalling NaN, payload below bit 16: NaN, not inf
    {0xff800001, 0xffc0},
    {0x7fa00000, 0x7fe0},  // signalling NaN, payload above bit 16: quieted, kept
    {0x7fffffff, 0x7fff},  // NaN that rounding would carry into the sign bit
};
// Denormals: to_bf16 rounds them; VCVTNEPS2BF16 (avx512bf16) flushes them to
// a signed zero (see rounds_like_to_bf16), so they are outside the
// bit-exact check.
const uint32_t kDenormals[] = {0x00000001, 0x00008000, 0x00018000,
                               0x007fffff, 0x80000001, 0x807fffff};

TEST(Bf16Convert, OracleRoundsToNearestEven) {
  for (const Rounding& r : kRoundings)
    EXPECT_EQ(to_bf16(from_bits(r.in)).bits, r.out) << std::hex << "0x" << r.in;
}

TEST(Bf16Convert, MatchesToBf16BitForBit) {
  testing::check_kernel(
      "convert_to_bf16", {{1}, {13}, {67}, {1000}, {100003}},
      [](const kernels::KernelTable& k, const testing::KernelShape& s, Rng& rng) {
        const size_t n = size_t(s[0]);
        // Uniformly random bit patterns (every class: NaN, inf, zero, denormal,
        // ties are rare), then the listed cases at both ends so they land in
        // full vectors and in the partial tail.
        std::vector<float> in(n);
        for (float& x : in) x = from_bits(rng.next_u32());
        std::vector<uint32_t> special;
        for (const Rounding& r : kRoundings) special.push_back(r.in);
        special.insert(special.end(), std::begin(kDenormals), std::end(kDenormals));
        const size_t S = special.size();
        for (size_t i = 0; i < S; ++i) {
          if (i < n) in[i] = from_bits(special[i]);
          if (i < n && n - 1 - i >= S) in[n - 1 - i] = from_bits(special[i]);
        }
        // Between them, a run of random ties with both mantissa parities.
        for (size_t i = S; i + S < n && i < S + 200; ++i)
          in[i] = from_bits((rng.next_u32() & 0xffff0000u) | 0x8000u);
        std::vector<bf16> out(n);
        k.convert_to_bf16(out.data(), in.data(), n);
        size_t bad = 0, first = n;
        for (size_t i = 0; i < n; ++i) {
          const bool ok =
              rounds_like_to_bf16(in[i], out[i]) && std::isnan(in[i]) == std::isnan(to_f32(out[i]));
          if (!ok && bad++ == 0) first = i;
        }
        EXPECT_EQ(bad, 0u) << where(k, s) << ": first at " << first << std::hex << " in 0x"
                           << (first < n ? f32_bits(in[first]) : 0) << " got 0x"
                           << (first < n ? out[first].bits : 0) << " want 0x"
                           << (first < n ? to_bf16(in[first]).bits : 0);
        for (size_t i = 0; i < std::size(kRoundings) && i < n; ++i) {
          EXPECT_EQ(out[i].bits, kRoundings[i].out)
              << where(k, s) << std::hex << " in 0x" << kRoundings[i].in;
          if (n - 1 - i >= S) {
            EXPECT_EQ(out[n - 1 - i].bits, kRoundings[i].out) << where(k, s) << " (tail)";
          }
        }
        return std::vector<Compare>{};
      });
}

// ---- AdamW ----

const std::vector<testing::KernelShape> kSizes = {{1}, {7}, {33}, {100}, {257}, {100003}};
constexpr float kLr = 0.01f, kBeta1 = 0.9f, kBeta2 = 0.95f, kEps = 1e-8f, kWd = 0.1f, kClip = 0.7f;

// p_bf16 is the working copy bf16 GEMMs read: to_bf16(p) exactly.
void expect_p_bf16_is_rounded_p(const std::string& ctx, const std::vector<float>& p,
                                const std::vector<bf16>& p_bf16) {
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < p.size(); ++i)
    if (!rounds_like_to_bf16(p[i], p_bf16[i]) && bad++ == 0) first = i;
  EXPECT_EQ(bad, 0u) << ctx << ": p_bf16 != to_bf16(p), first at " << first << " p " << p[first]
                     << " p_bf16 " << to_f32(p_bf16[first]);
}

TEST(Bf16AdamW, ParameterCopyIsTheRoundedParameter) {
  testing::check_kernel(
      "adamw+p_bf16", kSizes,
      [](const kernels::KernelTable& k, const testing::KernelShape& s, Rng& rng) {
        const size_t n = size_t(s[0]);
        auto p = testing::random_vector(rng, n), p_ref = p, p_plain = p;
        auto m = testing::random_vector(rng, n, -0.1f, 0.1f), m_ref = m, m_plain = m;
        auto v = testing::random_vector(rng, n, 0.0f, 0.01f), v_ref = v, v_plain = v;
        std::vector<bf16> p_bf16(n, bf16{0x7fc0}), p_bf16_ref(n);  // starts as NaN
        std::vector<Compare> cmp;
        for (int t = 1; t <= 3; ++t) {
          const auto g = testing::random_vector(rng, n);
          const std::string tag = "(t=" + std::to_string(t) + ")";
          const kernels::StepScalars sc = testing::adamw_step(kLr, kClip, t, kBeta1, kBeta2);
          k.adamw(p.data(), p_bf16.data(), g.data(), m.data(), v.data(), n, &sc, kBeta1, kBeta2, kEps, kWd);
          k.adamw(p_plain.data(), nullptr, g.data(), m_plain.data(), v_plain.data(), n, &sc, kBeta1, kBeta2, kEps,
                  kWd);
          kernels::ref::adamw(p_ref.data(), p_bf16_ref.data(), g.data(), m_ref.data(), v_ref.data(), n, &sc,
                              kBeta1, kBeta2, kEps, kWd);
          expect_p_bf16_is_rounded_p(where(k, s) + tag, p, p_bf16);
          // Writing the copy changes nothing else: the same bits as without it.
          EXPECT_TRUE(p == p_plain && m == m_plain && v == v_plain) << where(k, s) << tag;
          // The f32 AdamW test's tolerances.
          cmp.push_back({"p" + tag, p, p_ref, 1e-6, 1e-5});
          cmp.push_back({"m" + tag, m, m_ref, 1e-7, 1e-5});
          cmp.push_back({"v" + tag, v, v_ref, 1e-9, 1e-5});
          cmp.push_back(compare_bf16(where(k, s), "p_bf16" + tag, p_bf16, p_bf16_ref, 1e-6, 1e-5));
        }
        return cmp;
      });
}

TEST(Bf16AdamW, Bf16MomentsMatchReference) {
  testing::check_kernel(
      "adamw_bf16_moments", kSizes,
      [](const kernels::KernelTable& k, const testing::KernelShape& s, Rng& rng) {
        const size_t n = size_t(s[0]);
        auto p_ref = testing::random_vector(rng, n);
        auto m_ref = random_bf16(rng, n, -0.1f, 0.1f);
        auto v_ref = random_bf16(rng, n, 0.0f, 0.01f);
        std::vector<bf16> p_bf16(n), p_bf16_ref(n);
        std::vector<Compare> cmp;
        for (int t = 1; t <= 3; ++t) {
          // Each step starts both sides from the same state (the reference's):
          // a moment one bf16 ulp apart after a step would move the next
          // update by ~2^-8 of it, a rounding rather than an error, and the
          // p tolerance stays the f32 one.
          auto p = p_ref;
          auto m = m_ref, v = v_ref;
          const auto g = testing::random_vector(rng, n);
          const std::string tag = "(t=" + std::to_string(t) + ")";
          const kernels::StepScalars sc = testing::adamw_step(kLr, kClip, t, kBeta1, kBeta2);
          k.adamw_bf16_moments(p.data(), p_bf16.data(), g.data(), m.data(), v.data(), n, &sc, kBeta1, kBeta2,
                               kEps, kWd);
          kernels::ref::adamw_bf16_moments(p_ref.data(), p_bf16_ref.data(), g.data(), m_ref.data(), v_ref.data(),
                                           n, &sc, kBeta1, kBeta2, kEps, kWd);
          expect_p_bf16_is_rounded_p(where(k, s) + tag, p, p_bf16);
          // p from the unrounded f32 moments on both sides: the f32 tolerance;
          // m and v: the f32 tolerance plus one bf16 ulp.
          cmp.push_back({"p" + tag, p, p_ref, 1e-6, 1e-5});
          cmp.push_back(compare_bf16(where(k, s), "m" + tag, m, m_ref, 1e-7, 1e-5));
          cmp.push_back(compare_bf16(where(k, s), "v" + tag, v, v_ref, 1e-9, 1e-5));
        }
        return cmp;
      });
}

}  // namespace
}  // namespace crucible
