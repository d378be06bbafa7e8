// EmbeddingGradRows across real MPI ranks (2 and 4): every rank's embedding
// rows of a step, added into the (already reduced) dense wte gradient, give
// every rank the same bits, equal to adding all ranks' rows in rank order
// and then row order, and within float rounding of the exact sum; a rank
// holding a vocabulary shard (tensor parallel) adds only its rows.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "comm/comm.h"
#include "parallel/embedding_rows.h"

namespace crucible::parallel {
namespace {

comm::Comm* comm() { return *comm::world(); }

struct RankRows {
  std::vector<int32_t> tokens;
  std::vector<float> rows;
};

// Rank q's rows: the same on every rank that regenerates them.
RankRows rows_of(int q, size_t R, int C, int V) {
  std::mt19937_64 rng(1000 + uint64_t(q));
  std::uniform_int_distribution<int> tok(0, V - 1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  RankRows r;
  for (size_t n = 0; n < R; ++n) r.tokens.push_back(n % 7 == 0 ? 3 : tok(rng));  // token 3 repeats
  for (size_t i = 0; i < R * size_t(C); ++i) r.rows.push_back(normal(rng));
  return r;
}

TEST(EmbeddingGradRows, EveryRanksRowsAddInRankOrderOnEveryRank) {
  const int W = comm()->size(), C = 37, V = 101;  // C not a multiple of the 64-channel blocks
  const size_t R = 50;
  for (const nn::IndexRange vocab : {nn::IndexRange{0, V}, nn::IndexRange{20, 70}}) {
    EmbeddingGradRows er(*comm(), R, C, Device::cpu());
    // The dense gradient, as the bucket reduction left it: the same on every rank.
    std::mt19937_64 rng(7);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> grad(size_t(vocab.size()) * C);
    for (float& g : grad) g = normal(rng);
    std::vector<float> want = grad;
    std::vector<double> exact(grad.begin(), grad.end());
    for (int q = 0; q < W; ++q) {
      const RankRows r = rows_of(q, R, C, V);
      for (size_t n = 0; n < R; ++n) {
        const int64_t t = r.tokens[n];
        if (t < vocab.lo || t >= vocab.hi) continue;
        for (int c = 0; c < C; ++c) {
          want[size_t(t - vocab.lo) * C + c] += r.rows[n * C + c];
          exact[size_t(t - vocab.lo) * C + c] += r.rows[n * C + c];
        }
      }
    }
    // This rank's rows, appended in two backward calls as two micro-batches would.
    const RankRows mine = rows_of(comm()->rank(), R, C, V);
    nn::EmbeddingRows* sink = er.sink();
    for (size_t half : {size_t(0), R / 2}) {
      const size_t n = half == 0 ? R / 2 : R - R / 2;
      std::memcpy(sink->tokens + sink->count, mine.tokens.data() + half, n * sizeof(int32_t));
      std::memcpy(sink->rows + sink->count * C, mine.rows.data() + half * C, n * C * sizeof(float));
      sink->count += n;
    }
    double traffic = 0;
    auto s = er.add_all(grad.data(), vocab, traffic);
    ASSERT_TRUE(s) << s.status().message();
    EXPECT_EQ(sink->count, 0u) << "emptied for the next step";
    EXPECT_DOUBLE_EQ(traffic, double(W - 1) * double(R * (4 + 4 * size_t(C))));
    EXPECT_EQ(std::memcmp(grad.data(), want.data(), grad.size() * sizeof(float)), 0)
        << "rank order, then row order, on rank " << comm()->rank();
    double worst = 0;
    for (size_t i = 0; i < grad.size(); ++i) worst = std::max(worst, std::fabs(grad[i] - exact[i]));
    EXPECT_LT(worst, 1e-5);
    // Every rank holds the same bits.
    std::vector<float> all(grad.size() * size_t(W));
    ASSERT_TRUE(comm()->allgather_bytes(grad.data(), grad.size() * sizeof(float), all.data()));
    for (int q = 0; q < W; ++q)
      EXPECT_EQ(std::memcmp(all.data() + size_t(q) * grad.size(), grad.data(), grad.size() * sizeof(float)), 0)
          << "rank " << q << " differs";
  }
}

TEST(EmbeddingGradRows, PaysOnlyWhileTheRowsAreFewerBytesThanTheTensor) {
  // gpt2-124M's bench step: 128 rows a rank against 50304 x 768.
  EXPECT_TRUE(EmbeddingGradRows::worth(2, 128, 50304, 768));
  // tiny's default at 2 ranks: 2048 rows against 8192 x 256.
  EXPECT_TRUE(EmbeddingGradRows::worth(2, 2048, 8192, 256));
  // 8 ranks of 4096 rows gather more than the allreduce moves.
  EXPECT_FALSE(EmbeddingGradRows::worth(8, 4096, 8192, 256));
  EXPECT_FALSE(EmbeddingGradRows::worth(1, 16, 50304, 768));
}

}  // namespace
}  // namespace crucible::parallel
