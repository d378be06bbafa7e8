// train.precision and train.recompute at the model level: recomputation
// changes no number (it runs the same deterministic kernels on the same
// inputs), only what the arena holds; bf16 follows the f32 model within
// what bf16's 8-bit significand allows; and GPT::activation_bytes is the
// arena's high water in every combination, one-pass and split backward.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/allocator.h"
#include "nn/gpt.h"
#include "optim/adamw.h"

namespace crucible {
namespace {

// Odd sizes on purpose: C = 72 (not a multiple of 16), hs = 24, V = 509
// (no power of two), T = 37 (two 32-row attention tiles, one partial).
const nn::GPTConfig kCfg{3, 3, 72, 509, 40};
constexpr int B = 3, T = 37;

struct Step {
  std::vector<float> losses;  // the three micro-batches' mean losses
  std::vector<float> grads;   // the gradient after them
  size_t high_water = 0;      // the arena's, over one micro-batch
};

Step run(DType precision, nn::Recompute recompute, bool split, int head_chunk = 0) {
  nn::GPTPart part = nn::GPTPart::whole(kCfg);
  part.precision = precision;
  part.recompute = recompute;
  part.head_chunk = head_chunk;
  nn::GPT model(kCfg, part);
  model.init_weights(5);
  Arena arena("test.precision");
  std::mt19937 rng(11);
  std::vector<int32_t> tokens(size_t(B) * T), targets(size_t(B) * T);
  Step out;
  for (int micro = 0; micro < 3; ++micro) {
    for (auto* v : {&tokens, &targets})
      for (auto& t : *v) t = int32_t(rng() % uint32_t(kCfg.vocab_size));
    arena.reset();
    nn::Activations a;
    model.bind(a, arena, 0, B, T);
    model.forward(a, tokens.data(), targets.data(), 1.0f);
    out.losses.push_back(model.loss(a));
    if (split) {
      model.backward(a, nullptr, nn::BackwardPass::kInput);
      model.backward(a, nullptr, nn::BackwardPass::kWeight);
    } else {
      model.backward(a, nullptr, nn::BackwardPass::kAll);
    }
    out.high_water = std::max(out.high_water, arena.high_water());
  }
  out.grads.assign(model.params().grads(), model.params().grads() + model.params().numel());
  return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// The fused head's chunk in these tests: 111 rows go as 4 x 25 + 11.
constexpr int kHeadChunk = 25;

double rel_l2(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0, n = 0;
  for (size_t i = 0; i < a.size(); ++i) d += double(a[i] - b[i]) * (a[i] - b[i]), n += double(b[i]) * b[i];
  return std::sqrt(d / std::max(n, 1e-30));
}

// train.fused_head: the logits of 25 rows at a time instead of all 111,
// each chunk's loss and gradient formed at once. The losses are the same
// numbers (each row's loss is computed alike: the chunk's GEMM gives a row
// the same dot products), the gradients differ only by the order wte's
// gradient sums over rows (chunk by chunk), and the arena no longer holds
// the (B,T,V) logits. In bf16 that change of f32 summation order reaches
// the gradients that backward stores in bf16: where a sum lands next to a
// rounding boundary it rounds the other way, one bf16 ulp (2^-8 relative)
// for that element. The bound, 2^-8/8 relative L2 (every element flipped
// would give 2^-8), allows one element in 64 to flip, and must stay far
// below bf16's own distance from f32 (asserted at a twentieth of it).
TEST(FusedHead, SameLossesAndGradientsWithoutTheLogits) {
  for (DType p : {DType::f32, DType::bf16})
    for (bool split : {false, true}) {
      const Step whole = run(p, nn::Recompute::kNone, split);
      const Step fused = run(p, nn::Recompute::kNone, split, kHeadChunk);
      const Step fused_full = run(p, nn::Recompute::kFull, split, kHeadChunk);
      const std::string tag = std::string(dtype_name(p)) + (split ? " split" : " one-pass");
      ASSERT_EQ(fused.losses.size(), whole.losses.size());
      for (size_t i = 0; i < whole.losses.size(); ++i)
        EXPECT_NEAR(fused.losses[i], whole.losses[i], 1e-6 * std::fabs(whole.losses[i])) << tag;
      const double g = rel_l2(fused.grads, whole.grads);
      EXPECT_LT(g, p == DType::f32 ? 1e-6 : std::ldexp(1.0, -8) / 8) << tag;
      if (p == DType::bf16) {
        EXPECT_LT(g, rel_l2(whole.grads, run(DType::f32, nn::Recompute::kNone, split).grads) / 20) << tag;
      }
      EXPECT_TRUE(same_bits(fused.grads, fused_full.grads)) << tag << ": recomputation still changes no number";
      const size_t logits = size_t(B) * T * kCfg.vocab_size * dtype_size(p);
      EXPECT_LT(fused.high_water + logits / 2, whole.high_water) << tag;
      std::printf("[fused head] %s: gradient rel L2 %.2e; arena high water %zu -> %zu bytes (full recompute %zu), "
                  "the logits %zu\n", tag.c_str(), g, whole.high_water, fused.high_water, fused_full.high_water,
                  logits);
    }
}


TEST(Recompute, ChangesNoNumberOnlyTheMemoryInEitherPrecision) {
  for (DType p : {DType::f32, DType::bf16})
    for (bool split : {false, true}) {
      const Step none = run(p, nn::Recompute::kNone, split);
      const Step sel = run(p, nn::Recompute::kSelective, split);
      const Step full = run(p, nn::Recompute::kFull, split);
      const std::string tag = std::string(dtype_name(p)) + (split ? " split" : " one-pass");
      // Bit-identical in both precisions: recomputation reruns the same
      // kernels on the same bits, and every kernel is deterministic.
      EXPECT_TRUE(same_bits(none.losses, sel.losses)) << tag;
      EXPECT_TRUE(same_bits(none.grads, sel.grads)) << tag;
      EXPECT_TRUE(same_bits(none.losses, full.losses)) << tag;
      EXPECT_TRUE(same_bits(none.grads, full.grads)) << tag;
      if (!split) {  // a kInput pass keeps what it recomputed for the weight pass
        EXPECT_LT(sel.high_water, none.high_water) << tag;
        EXPECT_LT(full.high_water, sel.high_water) << tag;
      }
      std::printf("[recompute] %s: arena high water none %zu, selective %zu, full %zu bytes\n",
                  tag.c_str(), none.high_water, sel.high_water, full.high_water);
    }
}

TEST(Recompute, ActivationEstimateIsTheArenasHighWater) {
  for (DType p : {DType::f32, DType::bf16})
    for (nn::Recompute rc : {nn::Recompute::kNone, nn::Recompute::kSelective, nn::Recompute::kFull})
      for (bool split : {false, true})
        for (int head_chunk : {0, kHeadChunk}) {
        nn::GPTPart part = nn::GPTPart::whole(kCfg);
        part.precision = p;
        part.recompute = rc;
        part.head_chunk = head_chunk;
        const size_t est = nn::GPT::activation_bytes(kCfg, part, 0, B, T, split);
        const size_t hw = run(p, rc, split, head_chunk).high_water;
        const std::string tag = std::string(dtype_name(p)) + " recompute " + std::to_string(int(rc)) +
                                (split ? " split" : "") + (head_chunk ? " fused head" : "");
        // The estimate is the high water but for the last allocation's alignment padding.
        EXPECT_GE(est, hw) << tag;
        EXPECT_LE(est - hw, 64u) << tag;
      }
}

TEST(Precision, Bf16FollowsTheF32Model) {
  const Step f = run(DType::f32, nn::Recompute::kNone, false);
  const Step h = run(DType::bf16, nn::Recompute::kNone, false);
  // Losses: ln(509) ~ 6.2 at init. bf16 rounds every GEMM operand and the
  // logits (relative error 2^-9 each); the loss is a mean over 111 tokens
  // of log-sum-exps of logits ~0.1, so its error is far below 1e-2.
  for (size_t i = 0; i < f.losses.size(); ++i) EXPECT_NEAR(h.losses[i], f.losses[i], 1e-2) << i;
  // Gradients: each is a sum of products of bf16-rounded operands, so
  // element-wise errors of a few 2^-8 relative compound through the layers;
  // the direction must agree (cosine > 0.999) and the norm within 2%.
  double dot = 0, nf = 0, nh = 0;
  for (size_t i = 0; i < f.grads.size(); ++i) {
    dot += double(f.grads[i]) * h.grads[i];
    nf += double(f.grads[i]) * f.grads[i];
    nh += double(h.grads[i]) * h.grads[i];
  }
  const double cosine = dot / std::sqrt(nf * nh);
  std::printf("[precision] bf16 vs f32: gradient cosine %.6f, norm ratio %.4f\n", cosine, std::sqrt(nh / nf));
  EXPECT_GT(cosine, 0.999);
  EXPECT_NEAR(std::sqrt(nh / nf), 1.0, 0.02);
  // And it is not the f32 model: bf16 really ran.
  EXPECT_FALSE(same_bits(f.grads, h.grads));
}

TEST(Precision, TheOptimizerRefreshesTheBf16CopyInItsPass) {
  nn::GPTPart part = nn::GPTPart::whole(kCfg);
  part.precision = DType::bf16;
  nn::GPT model(kCfg, part);
  model.init_weights(3);
  const nn::ParamRegistry& P = model.params();
  auto copy_is_rounded_values = [&] {
    for (size_t i = 0; i < P.numel(); ++i)
      if (P.values_bf16()[i].bits != to_bf16(P.values()[i]).bits) return false;
    return true;
  };
  ASSERT_NE(P.values_bf16(), nullptr);
  EXPECT_TRUE(copy_is_rounded_values()) << "after init";
  optim::AdamW adam(model.params(), optim::AdamWConfig{});
  Arena arena("test.precision");
  std::vector<int32_t> tokens(size_t(B) * T, 7), targets(size_t(B) * T, 3);
  model.forward(arena, tokens.data(), targets.data(), B, T, 1.0f);
  model.backward(arena);
  const std::vector<float> before(P.values(), P.values() + P.numel());
  adam.step(1e-2f);
  EXPECT_FALSE(same_bits(before, std::vector<float>(P.values(), P.values() + P.numel())));
  EXPECT_TRUE(copy_is_rounded_values()) << "after a step";
  // An f32 model has no copy.
  nn::GPT f32(kCfg);
  EXPECT_EQ(f32.params().values_bf16(), nullptr);
}

}  // namespace
}  // namespace crucible
