#include "profile/analysis.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace crucible::profile {
namespace {

TEST(Mfu, HandComputed) {
  // 1e9 FLOP/token x 500 token/s = 5e11 FLOP/s of a 1e12 FLOP/s peak: 50%.
  EXPECT_DOUBLE_EQ(mfu(1e9, 500, 1e12), 0.5);
  EXPECT_EQ(mfu(1e9, 500, 0), 0);
}

TEST(Mfu, FromModelConfigUsesPalmCount) {
  // L=2, C=64, V=512, T=32. Per layer (nn::GPTConfig::matmul_params):
  //   qkv 3C^2 + 3C, proj C^2 + C, fc 4C^2 + 4C, fc-proj 4C^2 + C, LN 4C
  //   = 12 C^2 + 13 C = 49152 + 832 = 49984.
  // N = V C + L * 49984 + 2C (final LN) = 32768 + 99968 + 128 = 132864.
  // FLOP/token = 6 N + 12 L C T = 797184 + 49152 = 846336.
  // 1000 token/s on a 1e9 FLOP/s peak: 846336e3 / 1e9 = 0.846336.
  nn::GPTConfig c;
  c.n_layer = 2, c.n_head = 2, c.n_embd = 64, c.vocab_size = 512, c.seq_len = 32;
  EXPECT_NEAR(mfu(c, 32, 1000, 1e9), 0.846336, 1e-12);
}

// in_use[i] = floor(i) + sawtooth of activations (period 8) + uniform noise.
std::vector<double> memory_series(int steps, double leak_per_step, int step_up_at = -1,
                                  double step_up = 0, uint64_t seed = 7) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> noise(-32 * 1024.0, 32 * 1024.0);
  std::vector<double> v;
  for (int i = 0; i < steps; ++i) {
    double floor = 64.0 * 1024 * 1024 + leak_per_step * i;
    if (step_up_at >= 0 && i >= step_up_at) floor += step_up;
    double activations = (i % 8) * 2.0 * 1024 * 1024;
    v.push_back(floor + activations + noise(gen));
  }
  return v;
}

TEST(DetectLeak, FiresOnInjectedLeak) {
  LeakVerdict v = detect_leak(memory_series(300, 4096));
  EXPECT_TRUE(v.leaking) << v.message;
  EXPECT_NEAR(v.bytes_per_step, 4096, 400);
  EXPECT_GT(v.floor_end, v.floor_start);
  EXPECT_NE(v.message.find("memory leak"), std::string::npos) << v.message;
}

TEST(DetectLeak, QuietOnCleanRuns) {
  for (uint64_t seed : {1, 2, 3, 4, 5}) {
    LeakVerdict v = detect_leak(memory_series(300, 0, -1, 0, seed));
    EXPECT_FALSE(v.leaking) << v.message;
    EXPECT_LT(std::fabs(v.bytes_per_step), 1024) << v.message;
  }
}

TEST(DetectLeak, OneTimeStepUpIsNotALeak) {
  // A checkpoint buffer of 8 MiB allocated once, at several points of the run.
  for (int at : {60, 150, 240}) {
    LeakVerdict v = detect_leak(memory_series(300, 0, at, 8.0 * 1024 * 1024));
    EXPECT_FALSE(v.leaking) << "step-up at " << at << ": " << v.message;
    EXPECT_GT(v.floor_end - v.floor_start, 7.0 * 1024 * 1024);  // it did see the growth
  }
}

TEST(DetectLeak, LeakOnTopOfStepUpStillFires) {
  LeakVerdict v = detect_leak(memory_series(300, 4096, 150, 8.0 * 1024 * 1024));
  EXPECT_TRUE(v.leaking) << v.message;
}

TEST(DetectLeak, QuietOnManyNoisyCleanRunsWithStepUps) {
  for (uint64_t seed = 100; seed < 140; ++seed) {
    EXPECT_FALSE(detect_leak(memory_series(300, 0, -1, 0, seed)).leaking) << seed;
    EXPECT_FALSE(
        detect_leak(memory_series(300, 0, 50 + int(seed % 200), 16.0 * 1024 * 1024, seed)).leaking)
        << seed;
  }
}

TEST(DetectLeak, WarmupGrowthIgnored) {
  // Pools fill during the first steps, then stay flat.
  auto v = memory_series(300, 0);
  for (int i = 0; i < 10; ++i) v[i] -= (10 - i) * 4.0 * 1024 * 1024;
  EXPECT_FALSE(detect_leak(v).leaking);
}

TEST(DetectLeak, TooFewStepsIsNoVerdict) {
  LeakVerdict v = detect_leak(memory_series(20, 1 << 20));
  EXPECT_FALSE(v.leaking);
  EXPECT_NE(v.message.find("too few"), std::string::npos) << v.message;
}

TEST(DetectLeak, NamesTheGrowingSite) {
  std::map<std::string, std::vector<double>> sites;
  sites["train.activations"] = memory_series(300, 0, -1, 0, 11);
  sites["ckpt.snapshot"] = memory_series(300, 0, 120, 16.0 * 1024 * 1024, 12);
  sites["dist.buckets"] = memory_series(300, 4096, -1, 0, 13);
  // A site that starts empty and grows (its relative growth is unbounded).
  std::vector<double> from_zero;
  for (int i = 0; i < 300; ++i) from_zero.push_back(2048.0 * i);
  sites["kernels.scratch"] = from_zero;
  auto leaks = detect_leaks_by_site(sites);
  ASSERT_EQ(leaks.size(), 2u);
  EXPECT_EQ(leaks[0].site, "dist.buckets");  // largest slope first
  EXPECT_EQ(leaks[1].site, "kernels.scratch");
  EXPECT_NE(leaks[0].verdict.message.find("dist.buckets"), std::string::npos);
}

// Synchronous data parallelism: every rank's step lasts as long as the
// slowest rank's compute plus the reduction; the others wait in comm.
std::vector<std::vector<PhaseTimes>> dp_steps(int ranks, int slow_rank, double fwd_factor,
                                              double data_factor = 1) {
  std::mt19937_64 gen(3);
  std::uniform_real_distribution<double> jitter(0.99, 1.01);
  std::vector<std::vector<PhaseTimes>> out(ranks);
  for (int s = 0; s < 20; ++s) {
    std::vector<PhaseTimes> step(ranks);
    double slowest = 0;
    for (int r = 0; r < ranks; ++r) {
      PhaseTimes& p = step[r];
      p.data_wait_ms = 2 * jitter(gen) * (r == slow_rank ? data_factor : 1);
      p.forward_ms = 50 * jitter(gen) * (r == slow_rank ? fwd_factor : 1);
      p.backward_ms = 40 * jitter(gen);
      p.optimizer_ms = 5 * jitter(gen);
      double compute = p.data_wait_ms + p.forward_ms + p.backward_ms + p.optimizer_ms + 3;
      slowest = std::max(slowest, compute);
      p.step_ms = compute;  // completed below
    }
    for (int r = 0; r < ranks; ++r) {
      step[r].comm_ms = slowest - step[r].step_ms + 5;  // wait for the slowest + transfer
      step[r].step_ms = slowest + 5;
      out[r].push_back(step[r]);
    }
  }
  return out;
}

TEST(DetectStragglers, NamesTheSlowRankAndPhase) {
  StragglerReport rep = detect_stragglers(dp_steps(4, 2, 1.3));
  ASSERT_EQ(rep.stragglers.size(), 1u) << rep.message;
  EXPECT_EQ(rep.stragglers[0].rank, 2);
  EXPECT_EQ(rep.stragglers[0].phase, "forward");
  EXPECT_NEAR(rep.stragglers[0].excess, 0.15, 0.02);  // +15 ms of ~100 ms compute
  EXPECT_NEAR(rep.stragglers[0].phase_excess_ms, 15, 1.5);
  EXPECT_NE(rep.message.find("rank 2"), std::string::npos) << rep.message;
}

TEST(DetectStragglers, SlowDataLoadingIsItsPhase) {
  StragglerReport rep = detect_stragglers(dp_steps(4, 1, 1.0, 10.0));  // data 2 -> 20 ms
  ASSERT_EQ(rep.stragglers.size(), 1u) << rep.message;
  EXPECT_EQ(rep.stragglers[0].rank, 1);
  EXPECT_EQ(rep.stragglers[0].phase, "data_wait");
}

TEST(DetectStragglers, BalancedRanksNone) {
  StragglerReport rep = detect_stragglers(dp_steps(4, -1, 1.0));
  EXPECT_TRUE(rep.stragglers.empty()) << rep.message;
  EXPECT_NE(rep.message.find("balanced"), std::string::npos);
  EXPECT_NEAR(rep.median_compute_ms, 100, 2);
}

TEST(DetectStragglers, ThresholdIsRespected) {
  // +30% forward = +15% compute: above a 10% threshold, below a 20% one.
  EXPECT_EQ(detect_stragglers(dp_steps(4, 0, 1.3), 0.10).stragglers.size(), 1u);
  EXPECT_TRUE(detect_stragglers(dp_steps(4, 0, 1.3), 0.20).stragglers.empty());
}

TEST(DetectStragglers, NoiseOnMillisecondStepsIsNotAStraggler) {
  // 42% slower but only 2.2 ms: scheduling noise on a toy-sized step.
  std::vector<std::vector<PhaseTimes>> r(2);
  for (int i = 0; i < 20; ++i) {
    r[0].push_back({7.4, 0.1, 2.0, 2.5, 0.6, 2.2});  // 5.2 ms compute, waits 2.2
    r[1].push_back({7.4, 0.1, 3.0, 3.5, 0.8, 0.0});  // 7.4 ms compute, waits nothing
  }
  EXPECT_TRUE(detect_stragglers(r, 0.10).stragglers.empty());
  EXPECT_EQ(detect_stragglers(r, 0.10, 1.0).stragglers.size(), 1u);
}

TEST(CommVolume, ExpectedBytesByZeroStage) {
  // P = 1e6 f32 parameters over 4 ranks: one ring pass moves 3/4 x 4 MB = 3 MB.
  EXPECT_DOUBLE_EQ(expected_comm_bytes_per_step(1000000, 4, 0, 4), 6e6);  // allreduce
  EXPECT_DOUBLE_EQ(expected_comm_bytes_per_step(1000000, 4, 1, 4), 9e6);  // + all-gather
  EXPECT_DOUBLE_EQ(expected_comm_bytes_per_step(1000000, 4, 2, 4), 6e6);  // RS + all-gather
  // bf16, 2 ranks: 2 x 1/2 x 2 MB = 2 MB.
  EXPECT_DOUBLE_EQ(expected_comm_bytes_per_step(1000000, 2, 0, 2), 2e6);
  EXPECT_EQ(expected_comm_bytes_per_step(1000000, 1, 0, 4), 0);
}

TEST(CommVolume, WarnsOutsideHalfToOneAndAHalf) {
  EXPECT_TRUE(check_comm_volume(6e6, 6e6).ok);
  EXPECT_TRUE(check_comm_volume(3.1e6, 6e6).ok);
  EXPECT_TRUE(check_comm_volume(8.9e6, 6e6).ok);
  auto low = check_comm_volume(1e6, 6e6);
  EXPECT_FALSE(low.ok);
  EXPECT_NEAR(low.ratio, 1.0 / 6, 1e-12);
  EXPECT_NE(low.warning.find("not actually distributing"), std::string::npos) << low.warning;
  auto high = check_comm_volume(1e7, 6e6);
  EXPECT_FALSE(high.ok);
  EXPECT_FALSE(high.warning.empty());
  EXPECT_TRUE(check_comm_volume(0, 0).ok);
  EXPECT_FALSE(check_comm_volume(1e6, 0).ok);
}

}  // namespace
}  // namespace crucible::profile
