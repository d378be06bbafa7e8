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

Step run(DType precision, nn::Recompute recompute, bool split) {
  nn::GPTPart part = nn::GPTPart::whole(kCfg);
  part.precision = precision;
  part.recompute = recompute;
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
    out.losses.push_back(model.forward(a, tokens.data(), targets.data(), 1.0f));
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
      for (bool split : {false, true}) {
        nn::GPTPart part = nn::GPTPart::whole(kCfg);
        part.precision = p;
        part.recompute = rc;
        const size_t est = nn::GPT::activation_bytes(kCfg, part, 0, B, T, split);
        const size_t hw = run(p, rc, split).high_water;
        const std::string tag = std::string(dtype_name(p)) + " recompute " + std::to_string(int(rc)) +
                                (split ? " split" : "");
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
