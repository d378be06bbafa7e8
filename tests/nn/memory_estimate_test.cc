// The memory a step needs, known before it runs: nn::GPT::activation_bytes
// against the arena's measured high-water mark, and the process's allocator
// peak of a real step against runtime::estimate_memory, for DESIGN.md's two
// standard workloads.
#include <gtest/gtest.h>

#include <random>

#include "core/allocator.h"
#include "nn/gpt.h"
#include "nn/workloads.h"
#include "optim/adamw.h"
#include "runtime/config.h"
#include "runtime/memory_estimate.h"

namespace crucible {
namespace {

struct Measured {
  size_t arena_high_water = 0;
  uint64_t allocator_growth = 0;  // peak bytes in use above what was there before
};

// One training step (forward, backward, AdamW) on random tokens.
Measured one_step(const nn::GPTConfig& cfg, int B, int T) {
  const uint64_t before = Allocator::global().stats().in_use;
  Allocator::global().reset_peak();
  Measured out;
  {
    nn::GPT model(cfg);
    model.init_weights(1);
    optim::AdamW adam(model.params(), optim::AdamWConfig{});
    Arena arena("test.activations");
    arena.reserve(nn::GPT::activation_bytes(cfg, B, T));
    std::mt19937 rng(7);
    std::vector<int32_t> tokens(size_t(B) * T), targets(size_t(B) * T);
    for (auto* v : {&tokens, &targets})
      for (auto& t : *v) t = int32_t(rng() % uint32_t(cfg.vocab_size));
    model.forward(arena, tokens.data(), targets.data(), B, T, 1.0f);
    model.backward(arena);
    adam.step(1e-4f);
    out.arena_high_water = arena.high_water();
    out.allocator_growth = Allocator::global().stats().peak - before;
  }
  return out;
}

void expect_estimates_hold(const char* name) {
  auto w = nn::find_workload(name);
  ASSERT_TRUE(w) << name;
  const nn::GPTConfig& cfg = w->model;
  const int B = w->batch, T = w->model.seq_len;
  const Measured m = one_step(cfg, B, T);
  const size_t act = nn::GPT::activation_bytes(cfg, B, T);
  // The arena's high water is the estimate but for the last allocation's
  // alignment padding.
  EXPECT_GE(act, m.arena_high_water) << name;
  EXPECT_LE(act - m.arena_high_water, 64u) << name;
  // The whole step, as the allocator counts it, within 10% above.
  runtime::Config rc;
  rc.model = cfg;
  rc.train.batch_size = B;
  const runtime::MemoryEstimate e = runtime::estimate_memory(rc, 1, 0);
  std::printf("[memory] %s: estimate %llu bytes in the allocator (%s), measured peak %llu\n", name,
              (unsigned long long)e.allocator_bytes(), e.describe().c_str(),
              (unsigned long long)m.allocator_growth);
  EXPECT_GE(e.allocator_bytes(), m.allocator_growth) << name;
  EXPECT_LE(double(e.allocator_bytes()), 1.10 * double(m.allocator_growth)) << name;
}

TEST(MemoryEstimate, TinyStepIsWhatWasEstimated) { expect_estimates_hold("tiny"); }
TEST(MemoryEstimate, Gpt2StepIsWhatWasEstimated) { expect_estimates_hold("gpt2-124M"); }

TEST(MemoryEstimate, AModelTooLargeIsRefusedNamingNeedAndSupply) {
  runtime::Config c;
  c.model.n_layer = 96;
  c.model.n_embd = 12288;
  c.model.n_head = 96;
  const auto e = runtime::estimate_memory(c, 1, 0);
  Status s = runtime::check_memory_fits(e, 1, 24ull << 30);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("[memory] this run needs"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("is available"), std::string::npos) << s.message();
  // A GPU run's memory is the GPU's: the refusal says whose.
  Status gpu = runtime::check_memory_fits(e, 1, 80ull << 30, "on cuda:0");
  ASSERT_FALSE(gpu.is_ok());
  EXPECT_NE(gpu.message().find(" is free on cuda:0; use"), std::string::npos) << gpu.message();
  // 64 ranks of the default each fit alone, not together on 24 GiB.
  runtime::Config d;
  const auto one = runtime::estimate_memory(d, 64, 0);
  EXPECT_TRUE(runtime::check_memory_fits(one, 1, 24ull << 30).is_ok());
  Status many = runtime::check_memory_fits(one, 64, 24ull << 30);
  ASSERT_FALSE(many.is_ok());
  EXPECT_NE(many.message().find(", x 64 ranks on this machine"), std::string::npos) << many.message();
  // ZeRO shards the optimizer: less per rank.
  d.dist.zero = 1;
  EXPECT_LT(runtime::estimate_memory(d, 4, 1).optimizer, runtime::estimate_memory(d, 1, 0).optimizer);
}

// Activations over the budget: the refusal names the cheapest change that
// fits at the same layout, in the planner's order. tiny at 32 sequences a
// micro-batch holds 256 MiB of f32 logits, which the fused head drops.
TEST(MemoryEstimate, TheBudgetRefusalNamesTheCheapestSavingThatFits) {
  auto w = nn::find_workload("tiny");
  ASSERT_TRUE(w);
  runtime::Config c;
  c.model = w->model;
  c.train.batch_size = 32;
  auto need = [&](const std::string& rc, bool fused) {
    runtime::Config x = c;
    x.train.recompute = rc, x.train.fused_head = fused;
    return runtime::estimate_memory(x, 1, 0).total();
  };
  const uint64_t whole = need("none", false), fused = need("none", true), full = need("full", false);
  const uint64_t full_fused = need("full", true);
  // Every other change needs more than both together.
  const uint64_t others = std::min({fused, full, need("selective", false), need("selective", true)});
  ASSERT_LT(fused + (100ull << 20), whole) << "the logits are not what the fused head saves";
  ASSERT_LT(full_fused, others);
  auto refusal = [&](uint64_t budget) {
    c.train.memory_limit_gb = double(budget) / 1e9;
    Status s = runtime::check_memory_budget(c, 1);
    EXPECT_FALSE(s.is_ok());
    return s.message();
  };
  // Between the fused head's need and the run's: the fused head alone.
  std::string m = refusal((fused + whole) / 2);
  EXPECT_NE(m.find("; at this layout train.fused_head=true fits (~"), std::string::npos) << m;
  // Below every single change but above both together.
  m = refusal(full_fused + (others - full_fused) / 2);
  EXPECT_NE(m.find("at this layout train.recompute=full and train.fused_head=true fits"), std::string::npos)
      << m;
  // Below everything: no advice at this layout.
  m = refusal(full_fused / 2);
  EXPECT_EQ(m.find("at this layout"), std::string::npos) << m;
  // The machine's memory, as the same advice: 4 ranks here, each with a
  // quarter of what is there less the process's allowance.
  c.train.memory_limit_gb = 0;
  Status here = runtime::check_memory_fits(c, 1, 0, 4, 4 * (fused + whole) / 2 + 4 * (96ull << 20));
  ASSERT_FALSE(here.is_ok());
  EXPECT_NE(here.message().find("is available; use a smaller model"), std::string::npos) << here.message();
  EXPECT_NE(here.message().find("; at this layout train.fused_head=true fits (~"), std::string::npos)
      << here.message();
  EXPECT_TRUE(runtime::check_memory_fits(c, 1, 0, 4, 4 * whole + 4 * (96ull << 20)).is_ok());
  // A run already fused is offered recomputation only.
  c.train.fused_head = true;
  m = refusal(full_fused + (fused - full_fused) / 2);
  EXPECT_NE(m.find("at this layout train.recompute="), std::string::npos) << m;
  EXPECT_EQ(m.find("train.fused_head=true fits"), std::string::npos) << m;
}

}  // namespace
}  // namespace crucible
