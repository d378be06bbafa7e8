// optim.moments = "bf16": AdamW keeps its moments in bf16 (widened, updated
// in f32, rounded back in one pass). It must follow the f32-moment optimizer
// within what rounding the moments allows, over a sharded optimizer too, and
// the checkpoint round trip (export to f32, import back) must be exact, so a
// resumed run continues bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/rng.h"
#include "nn/gpt.h"
#include "optim/adamw.h"

namespace crucible::optim {
namespace {

const nn::GPTConfig kCfg{2, 2, 32, 61, 16};

void random_grads(nn::GPT& gpt, uint64_t seed) {
  Rng rng(seed, 3);
  rng.fill_normal(gpt.params().grads(), gpt.params().numel(), 0.0f, 0.1f);
}

TEST(AdamWMoments, Bf16MomentsFollowF32Moments) {
  nn::GPT a(kCfg), b(kCfg);
  a.init_weights(5);
  b.init_weights(5);
  AdamWConfig f32cfg, bf16cfg;
  bf16cfg.moments = DType::bf16;
  AdamW fa(a.params(), f32cfg), fb(b.params(), bf16cfg);
  const size_t n = a.params().numel();
  std::vector<float> start(a.params().values(), a.params().values() + n);
  for (int step = 0; step < 20; ++step) {
    random_grads(a, 100 + step);
    random_grads(b, 100 + step);
    fa.step(1e-3f);
    fb.step(1e-3f);
  }
  // Each update is ~lr; a moment rounded to bf16 (2^-9 relative) moves an
  // update by about that fraction, so after 20 steps the parameters' change
  // agrees to ~1%: compare the change, not the value (dominated by init).
  double diff = 0, change = 0;
  for (size_t i = 0; i < n; ++i) {
    const double da = double(a.params().values()[i]) - start[i], db = double(b.params().values()[i]) - start[i];
    diff += (da - db) * (da - db);
    change += da * da;
  }
  const double rel = std::sqrt(diff / change);
  std::printf("[moments] bf16 vs f32 moments: parameter change differs by %.4f (relative L2) after 20 steps\n", rel);
  EXPECT_LT(rel, 0.02);
  EXPECT_GT(rel, 0.0);  // it really stored them in bf16
}

TEST(AdamWMoments, CheckpointRoundTripIsExactAndShardsAgree) {
  nn::GPT a(kCfg), b(kCfg);
  a.init_weights(7);
  b.init_weights(7);
  const size_t n = a.params().numel();
  AdamWConfig cfg;
  cfg.moments = DType::bf16;
  cfg.grad_clip = 0;  // each shard alone would clip by its own norm
  AdamW whole(a.params(), cfg);
  // Two shards of the same buffer split at odd places (ZeRO's pieces).
  const size_t cut = n / 3 + 5;
  AdamW s0(b.params(), cfg, {{0, cut}}), s1(b.params(), cfg, {{cut, n}});
  for (int step = 0; step < 3; ++step) {
    random_grads(a, 7 + step);
    random_grads(b, 7 + step);
    whole.step(1e-3f);
    s0.step(1e-3f);
    s1.step(1e-3f);
  }
  EXPECT_EQ(std::memcmp(a.params().values(), b.params().values(), n * sizeof(float)), 0)
      << "sharding changes nothing";
  std::vector<float> m(n), v(n), m2(n), v2(n);
  whole.export_moments(m.data(), v.data());
  AdamW again(a.params(), cfg);
  again.import_moments(m.data(), v.data());
  again.export_moments(m2.data(), v2.data());
  EXPECT_EQ(std::memcmp(m.data(), m2.data(), n * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(v.data(), v2.data(), n * sizeof(float)), 0);
  // The exported moments are bf16 values (their low 16 bits are zero), not zeros.
  size_t nonzero = 0;
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &m[i], 4);
    EXPECT_EQ(bits & 0xffffu, 0u) << i;
    nonzero += m[i] != 0.0f;
  }
  EXPECT_GT(nonzero, n / 2);
  // One more step from the imported state is the uninterrupted step.
  random_grads(a, 50);
  std::vector<float> before(a.params().values(), a.params().values() + n);
  again.set_steps_taken(whole.steps_taken());
  again.step(1e-3f);
  std::vector<float> resumed(a.params().values(), a.params().values() + n);
  std::memcpy(a.params().values(), before.data(), n * sizeof(float));
  whole.step(1e-3f);
  EXPECT_EQ(std::memcmp(resumed.data(), a.params().values(), n * sizeof(float)), 0);
}

}  // namespace
}  // namespace crucible::optim
