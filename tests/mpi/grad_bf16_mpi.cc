// dist.grad_dtype = "bf16" on real ranks: DataParallel's two-phase exchange
// (bf16 pieces to their owners, f32 sums in rank order, rounded sums
// gathered back) gives every rank the same bits, equal to what each rank can
// compute alone from every rank's inputs; half the f32 traffic.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "comm/comm.h"
#include "core/rng.h"
#include "nn/params.h"
#include "parallel/data_parallel.h"

namespace crucible::parallel {
namespace {

comm::Comm* comm() { return *comm::world(); }

// Uneven parameter sizes, so pieces and buckets are uneven too.
void register_params(nn::ParamRegistry& P) {
  P.add("a", {37, 11}, true, nn::Init::zeros);
  P.add("b", {1001}, false, nn::Init::zeros);
  P.add("c", {64, 65}, true, nn::Init::zeros);
  P.allocate();
}

std::vector<float> rank_grads(int r, size_t n) {
  std::vector<float> g(n);
  Rng rng(99, uint64_t(r));
  rng.fill_uniform(g.data(), n, -1.0f, 1.0f);
  return g;
}

void expect_bf16_reduction(int zero) {
  const int W = comm()->size(), me = comm()->rank();
  nn::ParamRegistry P;
  register_params(P);
  const size_t n = P.numel();
  // A small bucket size: several buckets, each cut into W pieces.
  DataParallel dp(*comm(), P, DataParallelConfig{0.01, zero, DType::bf16});
  ASSERT_GT(dp.num_buckets(), 1u);
  const std::vector<float> mine = rank_grads(me, n);
  std::memcpy(P.grads(), mine.data(), n * sizeof(float));
  dp.begin_reduction();
  dp.on_grads_ready(n / 2);  // some buckets start during "backward"
  dp.on_grads_ready(0);
  auto held = dp.finish_reduction();
  ASSERT_TRUE(held.is_ok()) << held.status().message();
  // What every rank must hold: each rank's gradient rounded to bf16, summed
  // in f32 in rank order; rounded once more where another rank owns it.
  std::vector<float> sum(n, 0.0f);
  for (int q = 0; q < W; ++q) {
    const std::vector<float> g = rank_grads(q, n);
    for (size_t i = 0; i < n; ++i) sum[i] += to_f32(to_bf16(g[i]));
  }
  size_t wrong = 0, owned = 0;
  std::vector<char> mine_piece(n, 0);
  for (const optim::Range& r : dp.optimizer_shard())
    for (size_t i = r.begin; i < r.end; ++i) mine_piece[i] = 1, ++owned;
  for (size_t i = 0; i < n; ++i) {
    if (zero == 2 && !mine_piece[i]) continue;  // only this rank's pieces are defined
    const float want = zero == 2 ? sum[i] : to_f32(to_bf16(sum[i]));
    if (std::memcmp(&want, &P.grads()[i], 4) != 0) ++wrong;
  }
  EXPECT_EQ(wrong, 0u) << "rank " << me << ", zero " << zero;
  if (zero == 2) {
    EXPECT_GT(owned, 0u);
  }
  // Half the f32 traffic of the same reduction.
  const double bf16_bytes = dp.take_traffic_bytes();
  DataParallel f32(*comm(), P, DataParallelConfig{0.01, zero, DType::f32});
  f32.begin_reduction();
  ASSERT_TRUE(f32.finish_reduction().is_ok());
  EXPECT_DOUBLE_EQ(bf16_bytes * 2, f32.take_traffic_bytes());
}

TEST(GradBf16, AllreduceSumsInF32AndEveryRankHoldsTheSameBits) { expect_bf16_reduction(0); }
TEST(GradBf16, ZeroOneGathersTheRoundedSums) { expect_bf16_reduction(1); }
TEST(GradBf16, ZeroTwoKeepsItsPiecesF32Sums) { expect_bf16_reduction(2); }

}  // namespace
}  // namespace crucible::parallel
