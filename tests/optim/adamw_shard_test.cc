// Sharded AdamW (ZeRO's building block) against the unsharded one, and the
// backward hook that tells data parallelism which gradients are final.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "core/allocator.h"
#include "core/rng.h"
#include "nn/gpt.h"
#include "optim/adamw.h"

namespace crucible::optim {
namespace {

void random_grads(nn::GPT& gpt, uint64_t seed) {
  Rng rng(seed, 3);
  rng.fill_normal(gpt.params().grads(), gpt.params().numel(), 0.0f, 0.1f);
}

// Two "ranks" in one process: shards that split the flat buffer at odd
// places (inside parameters and inside decay runs).
std::vector<std::vector<Range>> two_shards(size_t n) {
  size_t a = n / 3 + 7, b = n / 2 + 13, c = (3 * n) / 4 + 1;
  return {{{0, a}, {b, c}}, {{a, b}, {c, n}}};
}

void expect_sharded_matches_full(float grad_clip) {
  nn::GPTConfig cfg{2, 2, 32, 61, 16};
  nn::GPT full(cfg), sharded(cfg);
  full.init_weights(5);
  sharded.init_weights(5);
  const size_t n = full.params().numel();
  AdamWConfig acfg;
  acfg.grad_clip = grad_clip;
  AdamW ref(full.params(), acfg);
  auto shards = two_shards(n);
  AdamW r0(sharded.params(), acfg, shards[0]), r1(sharded.params(), acfg, shards[1]);
  EXPECT_EQ(r0.shard_numel() + r1.shard_numel(), n);
  for (int step = 0; step < 4; ++step) {
    random_grads(full, 100 + step);
    random_grads(sharded, 100 + step);
    StepInfo a = ref.step(1e-2f);
    // The all-sum of the two ranks' squared norms, as the data-parallel layer supplies it.
    double sq[2] = {0, 0};
    for (int r = 0; r < 2; ++r)
      for (const Range& g : shards[r])
        for (size_t i = g.begin; i < g.end; ++i)
          sq[r] += double(sharded.params().grads()[i]) * sharded.params().grads()[i];
    double total = sq[0] + sq[1];
    StepInfo b0 = r0.step(1e-2f, [&](double) { return total; });
    StepInfo b1 = r1.step(1e-2f, [&](double) { return total; });
    EXPECT_NEAR(b0.grad_norm, a.grad_norm, 1e-9 * a.grad_norm);
    EXPECT_EQ(b0.clip_scale, b1.clip_scale);
  }
  const float* p = full.params().values();
  const float* q = sharded.params().values();
  if (grad_clip <= 0) {
    EXPECT_EQ(std::memcmp(p, q, n * sizeof(float)), 0) << "no clipping: bit-identical";
  } else {
    for (size_t i = 0; i < n; ++i) ASSERT_NEAR(p[i], q[i], 1e-6f * (1 + std::abs(p[i]))) << i;
  }
  // The moments, gathered into the full layout, equal the unsharded ones.
  std::vector<float> m(n, 0.0f), v(n, 0.0f);
  r0.export_moments(m.data(), v.data());
  r1.export_moments(m.data(), v.data());
  for (size_t i = 0; i < n; ++i) {
    ASSERT_NEAR(m[i], ref.m()[i], 1e-6f * (1 + std::abs(ref.m()[i]))) << i;
    ASSERT_NEAR(v[i], ref.v()[i], 1e-6f * (1 + std::abs(ref.v()[i]))) << i;
  }
  // import_moments takes back exactly the shard's ranges.
  AdamW again(sharded.params(), acfg, shards[1]);
  again.import_moments(m.data(), v.data());
  EXPECT_EQ(std::memcmp(again.m(), r1.m(), r1.shard_numel() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(again.v(), r1.v(), r1.shard_numel() * sizeof(float)), 0);
}

TEST(AdamWShard, TwoShardsEqualTheFullUpdateWithoutClipping) { expect_sharded_matches_full(0); }
TEST(AdamWShard, TwoShardsEqualTheFullUpdateWithClipping) { expect_sharded_matches_full(0.05f); }

TEST(GradsReadyHook, ReportsFinalGradientsFromTheEndOfTheBuffer) {
  nn::GPTConfig cfg{3, 2, 32, 61, 16};
  nn::GPT gpt(cfg);
  gpt.init_weights(9);
  const size_t n = gpt.params().numel();
  const int B = 2, T = 16;
  std::vector<int32_t> tok(B * T), tgt(B * T);
  Rng rng(1, 1);
  for (auto& t : tok) t = int32_t(rng.next_u32() % 61);
  for (auto& t : tgt) t = int32_t(rng.next_u32() % 61);
  Arena arena("test");
  gpt.forward(arena, tok.data(), tgt.data(), B, T, 1.0f);
  std::vector<size_t> offsets;
  std::vector<std::vector<float>> seen;  // the gradients [offset, n) when reported
  gpt.backward(arena, [&](size_t from) {
    offsets.push_back(from);
    seen.emplace_back(gpt.params().grads() + from, gpt.params().grads() + n);
  });
  ASSERT_EQ(offsets.size(), size_t(cfg.n_layer + 2));  // ln_f, each block, the embeddings
  EXPECT_EQ(offsets.back(), 0u);
  for (size_t i = 1; i < offsets.size(); ++i) EXPECT_LT(offsets[i], offsets[i - 1]);
  for (size_t i = 0; i < offsets.size(); ++i)
    EXPECT_EQ(std::memcmp(seen[i].data(), gpt.params().grads() + offsets[i],
                          seen[i].size() * sizeof(float)),
              0)
        << "gradients after offset " << offsets[i] << " changed after being reported final";
}

}  // namespace
}  // namespace crucible::optim
