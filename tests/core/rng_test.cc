#include "core/rng.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <vector>

namespace crucible {
namespace {

using Block = std::array<uint32_t, 4>;

Block philox(Block ctr, std::array<uint32_t, 2> key) {
  Block out;
  philox4x32(ctr.data(), key.data(), out.data());
  return out;
}

// Known-answer vectors for Philox4x32-10 from Random123 (kat_vectors).
TEST(Philox, KnownAnswerZero) {
  EXPECT_EQ(philox({0, 0, 0, 0}, {0, 0}), (Block{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
}

TEST(Philox, KnownAnswerAllOnes) {
  EXPECT_EQ(philox({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}),
            (Block{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
}

TEST(Philox, KnownAnswerPi) {
  EXPECT_EQ(philox({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
            (Block{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

std::vector<uint32_t> draws(Rng& r, int n) {
  std::vector<uint32_t> v(n);
  for (auto& x : v) x = r.next_u32();
  return v;
}

TEST(Rng, SameSeedAndStreamGiveTheSameSequence) {
  Rng a(42, 7), b(42, 7);
  EXPECT_EQ(draws(a, 100), draws(b, 100));
}

TEST(Rng, PositionCountsDrawsAndSeekReproducesThem) {
  Rng r(1234, 3);
  EXPECT_EQ(r.position(), 0u);
  std::vector<uint32_t> all = draws(r, 37);
  EXPECT_EQ(r.position(), 37u);

  for (uint64_t pos : {0, 1, 3, 4, 5, 8, 17, 30}) {
    Rng s(1234, 3);
    s.seek(pos);
    EXPECT_EQ(s.position(), pos);
    std::vector<uint32_t> rest = draws(s, int(37 - pos));
    EXPECT_EQ(rest, std::vector<uint32_t>(all.begin() + pos, all.end())) << "pos " << pos;

    Rng c(1234, 3, pos);  // the counter argument is the same as seek()
    EXPECT_EQ(draws(c, int(37 - pos)), rest) << "pos " << pos;
  }

  // Seeking backwards on a used generator replays.
  r.seek(10);
  EXPECT_EQ(r.next_u32(), all[10]);
}

TEST(Rng, SavedPositionRestoresFloatDraws) {
  Rng r(99, 0);
  for (int i = 0; i < 5; ++i) r.normal();
  r.uniform();
  uint64_t saved = r.position();
  std::vector<float> want = {r.normal(), r.uniform(), r.normal(), r.normal()};
  Rng resumed(99, 0, saved);
  std::vector<float> got = {resumed.normal(), resumed.uniform(), resumed.normal(),
                            resumed.normal()};
  EXPECT_EQ(got, want);
}

TEST(Rng, DifferentStreamsAndSeedsDiffer) {
  std::vector<std::vector<uint32_t>> seqs;
  for (auto [seed, stream] : {std::pair<uint64_t, uint64_t>{1, 0},
                              {1, 1},
                              {2, 0},
                              {2, 1},
                              {0, 0},
                              {1, uint64_t(1) << 32}}) {
    Rng r(seed, stream);
    seqs.push_back(draws(r, 64));
  }
  for (size_t i = 0; i < seqs.size(); ++i)
    for (size_t j = i + 1; j < seqs.size(); ++j) {
      int same = 0;
      for (int k = 0; k < 64; ++k) same += seqs[i][k] == seqs[j][k];
      EXPECT_LE(same, 1) << "sequences " << i << " and " << j;
    }
}

TEST(Rng, UniformIsInTheUnitInterval) {
  Rng r(5, 5);
  double sum = 0;
  const int n = 100000;
  for (int i = 0; i < n; ++i) {
    float u = r.uniform();
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    sum += u;
  }
  // mean 1/2, sd of the mean sqrt(1/12/n) ~ 0.0009; 6 sigma
  EXPECT_NEAR(sum / n, 0.5, 0.0055);
}

TEST(Rng, NormalHasUnitMeanAndVarianceWithinStatisticalBounds) {
  Rng r(2024, 11);
  const int n = 100000;
  double sum = 0, sum2 = 0, sum4 = 0;
  int beyond3 = 0;
  for (int i = 0; i < n; ++i) {
    double x = r.normal();
    ASSERT_TRUE(std::isfinite(x));
    sum += x;
    sum2 += x * x;
    sum4 += x * x * x * x;
    beyond3 += std::abs(x) > 3.0;
  }
  double mean = sum / n, var = sum2 / n - mean * mean;
  // 6 sigma bounds: sd(mean) = 1/sqrt(n) ~ 0.0032, sd(var) = sqrt(2/n) ~ 0.0045.
  EXPECT_NEAR(mean, 0.0, 6.0 / std::sqrt(n));
  EXPECT_NEAR(var, 1.0, 6.0 * std::sqrt(2.0 / n));
  // Fourth moment 3 (sd sqrt(96/n) ~ 0.031): catches a wrong shape with the right variance.
  EXPECT_NEAR(sum4 / n, 3.0, 6.0 * std::sqrt(96.0 / n));
  // P(|x|>3) = 0.0027 -> ~270 of 100k; sd ~16.
  EXPECT_NEAR(beyond3, 270, 100);
}

TEST(Rng, FillNormalAndFillUniformApplyTheirParameters) {
  Rng r(8, 1);
  const int n = 50000;
  std::vector<float> x(n);
  r.fill_normal(x.data(), n, 3.0f, 0.5f);
  double sum = 0, sum2 = 0;
  for (float v : x) sum += v, sum2 += double(v) * v;
  double mean = sum / n, sd = std::sqrt(sum2 / n - mean * mean);
  EXPECT_NEAR(mean, 3.0, 0.02);
  EXPECT_NEAR(sd, 0.5, 0.01);

  r.fill_uniform(x.data(), n, -2.0f, 6.0f);
  sum = 0;
  for (float v : x) {
    ASSERT_GE(v, -2.0f);
    ASSERT_LT(v, 6.0f);
    sum += v;
  }
  EXPECT_NEAR(sum / n, 2.0, 0.07);

  // fill_* draws are the same as the scalar draws at the same position.
  Rng a(8, 2), b(8, 2);
  float y[3];
  a.fill_normal(y, 3, 0.0f, 1.0f);
  for (float v : y) EXPECT_EQ(v, b.normal());
  EXPECT_EQ(a.position(), b.position());
}

}  // namespace
}  // namespace crucible
