// A model cut into parts (pipeline stages, interleaved chunks) computes what
// the whole model computes: the parts chained by hand, with several
// micro-batches in flight and the backward split into its input and weight
// passes, give the whole model's losses bit for bit and its gradients (the
// tied wte's two copies summed); the activation estimate holds per chunk;
// a replica does not count twice in the gradient norm.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <random>

#include "core/allocator.h"
#include "support/kernel_harness.h"
#include "nn/gpt.h"
#include "optim/adamw.h"

namespace crucible::nn {
namespace {

GPTConfig small() { return GPTConfig{4, 2, 16, 37, 8}; }

struct Batch {
  std::vector<int32_t> tokens, targets;
};

std::vector<Batch> batches(int n, int B, int T, int V, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Batch> out;
  out.resize(size_t(n));
  for (auto& b : out)
    for (auto* v : {&b.tokens, &b.targets}) {
      v->resize(size_t(B) * T);
      for (auto& t : *v) t = int32_t(rng() % uint64_t(V));
    }
  return out;
}

std::map<std::string, std::vector<float>> grads_by_name(const GPT& m) {
  std::map<std::string, std::vector<float>> out;
  for (const auto& s : m.params().specs()) {
    const float* g = m.params().grads() + s.offset;
    out[s.name].assign(g, g + s.numel);
  }
  return out;
}

double rel_l2(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0, n = 0;
  for (size_t i = 0; i < a.size(); ++i) d += double(a[i] - b[i]) * (a[i] - b[i]), n += double(b[i]) * b[i];
  return std::sqrt(d / std::max(n, 1e-30));
}

// Two pipeline ranks, two chunks each: stage s = chunk * 2 + rank holds block s.
struct Pipeline {
  GPT rank0, rank1;
  explicit Pipeline(const GPTConfig& c)
      : rank0(c, GPTPart{{{0, 1}, {2, 3}}, true, false}), rank1(c, GPTPart{{{1, 2}, {3, 4}}, false, true}) {}
  GPT& at(int stage) { return stage % 2 == 0 ? rank0 : rank1; }
};

TEST(GPTPart, ChainedChunksEqualTheWholeModel) {
  for (BackwardPass mode : {BackwardPass::kAll, BackwardPass::kInput}) {
    const GPTConfig cfg = small();
    const int B = 2, T = 8, M = 3;
    const float scale = 1.0f / M;
    auto data = batches(M, B, T, cfg.vocab_size, testing::test_seed());

    GPT whole(cfg);
    whole.init_weights(11);
    std::vector<float> whole_loss;
    {
      Arena arena("test.whole");
      for (const auto& b : data) {
        arena.reset();
        whole_loss.push_back(whole.forward(arena, b.tokens.data(), b.targets.data(), B, T, scale));
        whole.backward(arena);
      }
    }

    Pipeline p(cfg);
    p.rank0.init_weights(11);
    p.rank1.init_weights(11);
    // Every micro-batch through all four stages before any backward: all
    // twelve contexts in flight at once, each on its own arena.
    std::vector<std::unique_ptr<Arena>> arenas;
    std::vector<std::vector<Activations>> acts(M, std::vector<Activations>(4));
    std::vector<float> loss(M);
    for (int i = 0; i < M; ++i)
      for (int s = 0; s < 4; ++s) {
        arenas.push_back(std::make_unique<Arena>("test.stage"));
        Activations& a = acts[size_t(i)][size_t(s)];
        p.at(s).bind(a, *arenas.back(), s / 2, B, T);
        if (s > 0) {  // "receive" the previous stage's output
          const float* prev = acts[size_t(i)][size_t(s - 1)].output();
          std::copy(prev, prev + size_t(B) * T * cfg.n_embd, a.input());
        }
        const Batch& b = data[size_t(i)];
        p.at(s).forward(a, s == 0 ? b.tokens.data() : nullptr, s == 3 ? b.targets.data() : nullptr, scale);
        if (s == 3) loss[size_t(i)] = p.at(s).loss(a);
      }
    for (int i = 0; i < M; ++i) EXPECT_EQ(loss[size_t(i)], whole_loss[size_t(i)]) << "micro " << i;
    // Backward in the reverse micro-batch order (any order is valid).
    for (int i = M - 1; i >= 0; --i)
      for (int s = 3; s >= 0; --s) {
        const float* dout = s == 3 ? nullptr : acts[size_t(i)][size_t(s + 1)].input_grad();
        p.at(s).backward(acts[size_t(i)][size_t(s)], dout, mode);
        if (s > 0) {
          EXPECT_NE(acts[size_t(i)][size_t(s)].input_grad(), nullptr);
        }
      }
    if (mode == BackwardPass::kInput)  // the weight passes later, in another order
      for (int i = 0; i < M; ++i)
        for (int s = 0; s < 4; ++s) p.at(s).backward(acts[size_t(i)][size_t(s)], nullptr, BackwardPass::kWeight);

    auto want = grads_by_name(whole);
    auto g0 = grads_by_name(p.rank0), g1 = grads_by_name(p.rank1);
    EXPECT_EQ(g0.size() + g1.size(), want.size() + 1) << "wte is on both ranks, nothing else twice";
    for (auto& [name, g] : want) {
      std::vector<float> got;
      if (name == "transformer.wte.weight") {
        got = g0.at(name);
        for (size_t k = 0; k < got.size(); ++k) got[k] += g1.at(name)[k];
      } else {
        got = g0.count(name) ? g0.at(name) : g1.at(name);
      }
      // Block gradients see the same operations in the same order as the
      // whole model's; only wte's sum of its two copies is ordered otherwise.
      EXPECT_LT(rel_l2(got, g), 1e-6) << name << (mode == BackwardPass::kAll ? " (one pass)" : " (split)");
    }
  }
}

TEST(GPTPart, ActivationEstimateHoldsPerChunk) {
  const GPTConfig cfg = small();
  const int B = 3, T = 7;
  auto data = batches(1, B, T, cfg.vocab_size, testing::test_seed());
  for (bool split : {false, true}) {
    Pipeline p(cfg);
    std::vector<Activations> acts(4);
    std::vector<std::unique_ptr<Arena>> arenas;
    for (int s = 0; s < 4; ++s) {
      arenas.push_back(std::make_unique<Arena>("test.stage"));
      p.at(s).bind(acts[size_t(s)], *arenas.back(), s / 2, B, T);
      p.at(s).forward(acts[size_t(s)], data[0].tokens.data(), data[0].targets.data(), 1.0f);
    }
    for (int s = 3; s >= 0; --s) {
      const float* dout = s == 3 ? nullptr : acts[size_t(s + 1)].input_grad();
      p.at(s).backward(acts[size_t(s)], dout, split ? BackwardPass::kInput : BackwardPass::kAll);
      if (split) p.at(s).backward(acts[size_t(s)], nullptr, BackwardPass::kWeight);
      const size_t est = GPT::activation_bytes(cfg, p.at(s).part(), s / 2, B, T, split);
      EXPECT_GE(est, arenas[size_t(s)]->high_water()) << "stage " << s << (split ? " split" : "");
      EXPECT_LE(est - arenas[size_t(s)]->high_water(), 64u) << "stage " << s << (split ? " split" : "");
    }
  }
}

TEST(GPTPart, ParametersAreTheWholeModelsByName) {
  const GPTConfig cfg = small();
  GPT whole(cfg);
  Pipeline p(cfg);
  whole.init_weights(5);
  p.rank0.init_weights(5);
  p.rank1.init_weights(5);
  for (const GPT* part : {&p.rank0, &p.rank1})
    for (const auto& s : part->params().specs()) {
      const ParamSpec* w = whole.params().find(s.name);
      ASSERT_NE(w, nullptr) << s.name;
      EXPECT_EQ(w->shape, s.shape);
      EXPECT_EQ(0, std::memcmp(whole.params().values() + w->offset, part->params().values() + s.offset,
                               s.numel * sizeof(float)))
          << s.name << ": initial values differ from the whole model's";
      EXPECT_EQ(s.replica, part == &p.rank1 && s.name == "transformer.wte.weight") << s.name;
    }
  EXPECT_EQ(GPT::flat_params(cfg, p.rank1.part()), p.rank1.params().numel());
}

TEST(GPTPart, ReplicaCountsOnceInTheGradientNorm) {
  const GPTConfig cfg = small();
  GPT head(cfg, GPTPart{{{2, 4}}, false, true});
  auto& P = head.params();
  std::mt19937 rng(3);
  std::normal_distribution<float> nd;
  for (size_t i = 0; i < P.numel(); ++i) P.grads()[i] = nd(rng);
  double want = 0;
  for (const auto& s : P.specs())
    if (!s.replica)
      for (size_t k = 0; k < s.numel; ++k) want += double(P.grads()[s.offset + k]) * P.grads()[s.offset + k];
  optim::AdamWConfig c;
  c.grad_clip = 0;
  optim::AdamW adam(P, c);
  EXPECT_NEAR(adam.step(1e-3f).grad_norm, std::sqrt(want), 1e-4 * std::sqrt(want));
}

TEST(GPTPartDeathTest, ChunksMustBeAscendingAndCoverTheirEnds) {
  const GPTConfig cfg = small();
  EXPECT_DEATH(GPT(cfg, GPTPart{{{1, 2}}, true, false}), "starts at block 0");
  EXPECT_DEATH(GPT(cfg, GPTPart{{{0, 2}, {1, 3}}, true, false}), "ascending");
  EXPECT_DEATH(GPT(cfg, GPTPart{{{2, 3}}, false, true}), "ends at the last block");
}

// The tied wte's two gradients apart (GPTPart::embedding_rows, for the
// data-parallel layer): wte is laid out last, so the first gradient-ready
// report of backward (right after the head) already covers it; the
// embedding's backward leaves wte.grad to the head and appends its rows
// instead, and those rows scattered into it give the whole model's wte
// gradient over several micro-batches, every other gradient unchanged.
TEST(GPTPart, EmbeddingRowsApartAddUpToTheTiedGradient) {
  const GPTConfig cfg = small();
  const int B = 2, T = 8, M = 3;
  auto data = batches(M, B, T, cfg.vocab_size, testing::test_seed());
  GPT whole(cfg);
  GPTPart part = GPTPart::whole(cfg);
  part.embedding_rows = true;
  GPT apart(cfg, part);
  whole.init_weights(11);
  apart.init_weights(11);
  const ParamSpec* wte = apart.params().find("transformer.wte.weight");
  ASSERT_TRUE(wte);
  for (const ParamSpec& s : apart.params().specs()) EXPECT_LE(s.offset, wte->offset) << s.name << " after wte";
  std::vector<int32_t> tokens(size_t(M) * B * T);
  std::vector<float> rows(tokens.size() * size_t(cfg.n_embd));
  EmbeddingRows sink{tokens.data(), rows.data(), tokens.size(), 0};
  apart.set_embedding_rows(&sink);
  Arena arena("test.rows");
  std::vector<size_t> ready;
  for (const auto& b : data)
    for (GPT* m : {&whole, &apart}) {
      arena.reset();
      m->forward(arena, b.tokens.data(), b.targets.data(), B, T, 1.0f / M);
      m->backward(arena, [&](size_t from) {
        if (m == &apart) ready.push_back(from);
      });
    }
  ASSERT_FALSE(ready.empty());
  EXPECT_LE(ready.front(), wte->offset) << "wte ready with the head";
  ASSERT_EQ(sink.count, tokens.size());
  for (size_t i = 0; i < M * size_t(B) * T; ++i)
    EXPECT_EQ(tokens[i], data[i / (B * T)].tokens[i % (B * T)]);
  float* g = apart.params().grads() + wte->offset;
  for (size_t n = 0; n < sink.count; ++n)
    for (int c = 0; c < cfg.n_embd; ++c) g[size_t(tokens[n]) * cfg.n_embd + c] += rows[n * cfg.n_embd + size_t(c)];
  auto want = grads_by_name(whole), got = grads_by_name(apart);
  for (const auto& [name, w] : want) {
    ASSERT_TRUE(got.count(name)) << name;
    if (name == "transformer.wte.weight")
      EXPECT_LT(rel_l2(got[name], w), 1e-6) << "the rows add in another order than the dense kernel's";
    else
      EXPECT_EQ(got[name], w) << name << ": bit for bit";
  }
}

}  // namespace
}  // namespace crucible::nn
