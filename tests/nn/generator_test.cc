// Incremental generation with a KV cache against the training forward, and
// the sampler against the distribution it claims to draw from.
#include "nn/generator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "core/rng.h"
#include "nn/gpt.h"
#include "nn/sampler.h"

namespace crucible {
namespace {

const nn::GPTConfig kCfg{/*n_layer=*/2, /*n_head=*/2, /*n_embd=*/32, /*vocab_size=*/61,
                         /*seq_len=*/24};

// A small GPT whose LayerNorm weights and biases are not 1/0, and whose
// attention scores are large enough that the softmax is far from uniform
// (N(0, 0.02) weights alone would make attention a near-plain average, which
// hides masking and cache-indexing mistakes).
class GeneratorTest : public ::testing::Test {
 protected:
  GeneratorTest() : gpt_(kCfg) {
    gpt_.init_weights(7);
    Rng rng(11, 0);
    auto& P = gpt_.params();
    for (const auto& s : P.specs()) {
      float* v = P.values() + s.offset;
      bool ln_weight = s.name.find("ln_") != std::string::npos && s.name.ends_with(".weight");
      if (ln_weight) {
        rng.fill_uniform(v, s.numel, 0.5f, 1.5f);
      } else if (s.name.ends_with(".bias")) {
        rng.fill_uniform(v, s.numel, -0.3f, 0.3f);
      } else if (s.name.ends_with("c_attn.weight")) {
        for (size_t i = 0; i < s.numel; ++i) v[i] *= 8.0f;
      }
    }
    Rng tok_rng(12, 0);
    tokens_.resize(kCfg.seq_len);
    for (auto& t : tokens_) t = int32_t(tok_rng.next_u32() % kCfg.vocab_size);
  }

  // (T,V) logits of the training forward on tokens_[0..T).
  std::vector<float> forward_logits(const std::vector<int32_t>& toks) {
    Arena arena("test.generator");
    const int T = int(toks.size()), V = kCfg.vocab_size;
    gpt_.forward(arena, toks.data(), nullptr, 1, T);
    return std::vector<float>(gpt_.logits(), gpt_.logits() + size_t(T) * V);
  }

  // Max |a - b| over row t of `ref` against `got` (V), relative to ref's scale.
  static void expect_row_close(const std::vector<float>& ref, int t, const float* got,
                               float scale) {
    const int V = kCfg.vocab_size;
    float err = 0;
    for (int v = 0; v < V; ++v) err = std::max(err, std::abs(ref[size_t(t) * V + v] - got[v]));
    EXPECT_LT(err, 1e-4f * scale) << "position " << t;
  }
  static float scale_of(const std::vector<float>& x) {
    float m = 0;
    for (float v : x) m = std::max(m, std::abs(v));
    return m;
  }

  nn::GPT gpt_;
  std::vector<int32_t> tokens_;
};

TEST_F(GeneratorTest, OneTokenAtATimeMatchesFullForward) {
  std::vector<float> ref = forward_logits(tokens_);
  const float scale = scale_of(ref);
  ASSERT_GT(scale, 0.1f) << "logits too small for a relative comparison to mean much";
  nn::Generator gen(gpt_);
  EXPECT_EQ(gen.capacity(), kCfg.seq_len);
  for (int t = 0; t < kCfg.seq_len; ++t) {
    const float* logits = gen.append(&tokens_[t], 1);
    EXPECT_EQ(gen.position(), t + 1);
    expect_row_close(ref, t, logits, scale);
  }
}

// A bf16 model's generator runs its GEMMs in bf16: its logits follow the
// bf16 training forward (which also rounds qkv, the pre-activation and the
// GELU output: a few bf16 roundings apart, ~1% of the logits' scale), and
// they are not the f32 generator's bit for bit.
TEST_F(GeneratorTest, Bf16ModelGeneratesInBf16) {
  nn::GPTPart part = nn::GPTPart::whole(kCfg);
  part.precision = DType::bf16;
  nn::GPT bf(kCfg, part);
  std::memcpy(bf.params().values(), gpt_.params().values(), gpt_.params().numel() * sizeof(float));
  bf.params().refresh_bf16();
  Arena arena("test.generator");
  const int T = kCfg.seq_len, V = kCfg.vocab_size;
  bf.forward(arena, tokens_.data(), nullptr, 1, T);
  const std::vector<float> ref(bf.logits(), bf.logits() + size_t(T) * V);
  const float scale = scale_of(ref);
  nn::Generator gen(bf), gen32(gpt_);
  const float* l = gen.append(tokens_.data(), T);
  float err = 0;
  for (int v = 0; v < V; ++v) err = std::max(err, std::abs(ref[size_t(T - 1) * V + v] - l[v]));
  EXPECT_LT(err, 0.02f * scale);
  const std::vector<float> mine(l, l + V);
  const float* f = gen32.append(tokens_.data(), T);
  EXPECT_NE(std::memcmp(mine.data(), f, size_t(V) * sizeof(float)), 0) << "the bf16 generator ran f32 GEMMs";
}

TEST_F(GeneratorTest, BatchedPromptThenSingleTokensMatchesFullForward) {
  std::vector<float> ref = forward_logits(tokens_);
  const float scale = scale_of(ref);
  nn::Generator gen(gpt_);
  const int P = 7;
  const float* logits = gen.append(tokens_.data(), P);
  EXPECT_EQ(gen.position(), P);
  expect_row_close(ref, P - 1, logits, scale);
  for (int t = P; t < kCfg.seq_len; ++t)
    expect_row_close(ref, t, gen.append(&tokens_[t], 1), scale);
  // A whole-context prompt in one pass, too.
  gen.reset();
  expect_row_close(ref, kCfg.seq_len - 1, gen.append(tokens_.data(), kCfg.seq_len), scale);
}

TEST_F(GeneratorTest, ResetAndReplayIsBitwiseIdenticalAndAllocatesNothing) {
  const int V = kCfg.vocab_size;
  nn::Generator gen(gpt_);
  auto run = [&] {
    std::vector<float> all;
    const float* l = gen.append(tokens_.data(), 5);
    all.insert(all.end(), l, l + V);
    for (int t = 5; t < kCfg.seq_len; ++t) {
      l = gen.append(&tokens_[t], 1);
      all.insert(all.end(), l, l + V);
    }
    return all;
  };
  std::vector<float> first = run();
  gen.reset();
  EXPECT_EQ(gen.position(), 0);
  // The first run created every GEMM primitive these shapes need; a replay
  // must take nothing from crucible's pool.
  const AllocatorStats before = Allocator::global().stats();
  std::vector<float> second = run();
  const AllocatorStats after = Allocator::global().stats();
  EXPECT_EQ(after.allocs, before.allocs) << "append() took memory from the pool";
  ASSERT_EQ(first.size(), second.size());
  EXPECT_EQ(0, std::memcmp(first.data(), second.data(), first.size() * sizeof(float)));
}

TEST_F(GeneratorTest, AppendingPastCapacityIsAnInvariantFailure) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  nn::Generator gen(gpt_);
  gen.append(tokens_.data(), kCfg.seq_len - 1);
  gen.append(&tokens_[0], 1);
  EXPECT_DEATH(gen.append(&tokens_[0], 1), "past model.seq_len");
}

// The sliding window, replayed with the training forward: greedy decoding
// over exactly the tokens the cache should hold at each step.
TEST_F(GeneratorTest, GenerateSlidesTheWindowBeyondCapacity) {
  const int cap = kCfg.seq_len, V = kCfg.vocab_size, n_new = 3 * cap;
  nn::Generator gen(gpt_);
  nn::SamplingConfig greedy{0.0f, 0};
  Rng rng(1, 0);
  std::vector<int32_t> prompt(tokens_.begin(), tokens_.begin() + 5);
  std::vector<int32_t> streamed;
  std::vector<int32_t> out =
      nn::generate(gen, prompt, n_new, 0, greedy, rng, [&](int32_t t) { streamed.push_back(t); });
  ASSERT_EQ(int(out.size()), n_new);
  EXPECT_EQ(out, streamed);
  for (int32_t t : out) EXPECT_TRUE(t >= 0 && t < V) << t;

  std::vector<int32_t> window = prompt, expected;
  for (int i = 0; i < n_new; ++i) {
    std::vector<float> logits = forward_logits(window);
    const float* last = logits.data() + (window.size() - 1) * V;
    int32_t tok = int32_t(std::max_element(last, last + V) - last);
    expected.push_back(tok);
    if (int(window.size()) < cap) {
      window.push_back(tok);
    } else {
      window.push_back(tok);
      window.erase(window.begin(), window.end() - cap / 2);
    }
  }
  EXPECT_EQ(out, expected);
}

TEST_F(GeneratorTest, GenerateFromEmptyPromptStartsAtBosAndIsSeeded) {
  nn::Generator gen(gpt_);
  nn::SamplingConfig cfg{0.9f, 10};
  Rng r1(5, 3), r2(5, 3), r3(5, 3);
  auto a = nn::generate(gen, {}, 30, 17, cfg, r1);
  auto b = nn::generate(gen, {17}, 30, 17, cfg, r2);
  EXPECT_EQ(a, b);
  auto c = nn::generate(gen, {}, 30, 17, cfg, r3);
  EXPECT_EQ(a, c) << "same Rng state must give the same tokens";
  EXPECT_TRUE(nn::generate(gen, {1, 2}, 0, 0, cfg, r3).empty());
}

TEST_F(GeneratorTest, PromptLongerThanCapacityKeepsItsLastCapacityTokens) {
  nn::Generator gen(gpt_);
  nn::SamplingConfig greedy{0.0f, 0};
  Rng rng(1, 0);
  std::vector<int32_t> long_prompt = tokens_;
  long_prompt.insert(long_prompt.end(), tokens_.begin(), tokens_.begin() + 10);
  std::vector<int32_t> tail(long_prompt.end() - kCfg.seq_len, long_prompt.end());
  auto a = nn::generate(gen, long_prompt, 12, 0, greedy, rng);
  auto b = nn::generate(gen, tail, 12, 0, greedy, rng);
  ASSERT_EQ(a.size(), 12u);
  EXPECT_EQ(a, b);
}

// ---- sampler ----

std::vector<double> softmax(const std::vector<float>& l, float temperature) {
  double mx = *std::max_element(l.begin(), l.end());
  std::vector<double> p(l.size());
  double sum = 0;
  for (size_t i = 0; i < l.size(); ++i) sum += p[i] = std::exp((l[i] - mx) / temperature);
  for (double& x : p) x /= sum;
  return p;
}

TEST(Sampler, GreedyIsArgmaxWithLowestIndexOnTies) {
  Rng rng(1, 0);
  std::vector<float> l = {0.1f, 2.0f, -1.0f, 2.0f, 1.9f};
  const uint64_t pos = rng.position();
  EXPECT_EQ(nn::sample_token(l.data(), 5, {0.0f, 0}, rng), 1);
  EXPECT_EQ(nn::sample_token(l.data(), 5, {-1.0f, 3}, rng), 1);
  EXPECT_EQ(rng.position(), pos) << "greedy decoding must not consume randomness";
}

TEST(Sampler, TopKOneIsArgmaxAtAnyTemperature) {
  Rng rng(2, 0);
  std::vector<float> l = {0.3f, -0.2f, 0.25f, 0.31f, 0.0f, 0.305f};
  for (float temp : {0.1f, 1.0f, 10.0f, 1000.0f})
    for (int i = 0; i < 200; ++i) ASSERT_EQ(nn::sample_token(l.data(), 6, {temp, 1}, rng), 3);
}

TEST(Sampler, TopKDrawsOnlyTheKLargestInProportion) {
  Rng rng(3, 0);
  // Tokens 2, 5, 7 are the three largest; the rest would take most of the
  // mass (there are many of them) if top_k were ignored.
  std::vector<float> l(40, 0.5f);
  l[2] = 1.5f;
  l[5] = 1.0f;
  l[7] = 0.8f;
  const float temp = 0.7f;
  const int n = 20000;
  std::map<int, int> count;
  for (int i = 0; i < n; ++i) ++count[nn::sample_token(l.data(), 40, {temp, 3}, rng)];
  ASSERT_EQ(count.size(), 3u);
  std::vector<double> p = softmax({l[2], l[5], l[7]}, temp);
  int k = 0;
  for (int id : {2, 5, 7}) {
    double f = double(count[id]) / n, se = std::sqrt(p[k] * (1 - p[k]) / n);
    EXPECT_NEAR(f, p[k], 4 * se) << "token " << id;
    ++k;
  }
}

TEST(Sampler, TopKBreaksTiesAtTheThresholdTowardsLowerIndices) {
  Rng rng(4, 0);
  std::vector<float> l = {0.0f, 1.0f, 1.0f, 1.0f, 2.0f};
  for (int i = 0; i < 2000; ++i) {
    int t = nn::sample_token(l.data(), 5, {1.0f, 2}, rng);
    ASSERT_TRUE(t == 4 || t == 1) << t;
  }
}

TEST(Sampler, FrequenciesMatchSoftmaxAtTemperatureOne) {
  Rng rng(5, 0);
  std::vector<float> l = {1.0f, -0.5f, 0.2f, 2.0f, 0.0f, -3.0f, 1.5f};
  const int V = int(l.size()), n = 20000;
  std::vector<int> count(V, 0);
  for (int i = 0; i < n; ++i) ++count[nn::sample_token(l.data(), V, {1.0f, 0}, rng)];
  std::vector<double> p = softmax(l, 1.0f);
  for (int v = 0; v < V; ++v) {
    double f = double(count[v]) / n, se = std::sqrt(p[v] * (1 - p[v]) / n);
    EXPECT_NEAR(f, p[v], 4 * se + 1e-4) << "token " << v;
  }
}

TEST(Sampler, SameSeedSameSequence) {
  std::vector<float> l = {0.5f, 0.4f, 0.3f, 0.2f, 0.1f, 0.0f};
  auto draw = [&](uint64_t seed) {
    Rng rng(seed, 9);
    std::vector<int32_t> s;
    for (int i = 0; i < 100; ++i) s.push_back(nn::sample_token(l.data(), 6, {1.3f, 4}, rng));
    return s;
  };
  EXPECT_EQ(draw(42), draw(42));
  EXPECT_NE(draw(42), draw(43));
}

}  // namespace
}  // namespace crucible
