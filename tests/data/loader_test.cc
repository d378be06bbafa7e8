#include "data/loader.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "core/rng.h"
#include "support/files.h"

namespace crucible::data {
namespace {

namespace fs = std::filesystem;

struct Batch {
  std::vector<int32_t> tokens, targets;
  bool operator==(const Batch&) const = default;
};

// The documented order, recomputed without the Loader: Fisher–Yates with the
// documented rejection rule, then the documented step/micro/rank slicing.
std::vector<uint64_t> naive_order(uint64_t S, uint64_t seed, uint64_t epoch, bool shuffle) {
  std::vector<uint64_t> order(S);
  for (uint64_t i = 0; i < S; ++i) order[i] = i;
  if (!shuffle) return order;
  Rng rng(seed, fnv1a64("crucible.data.loader") + epoch);
  for (uint64_t i = S - 1; i >= 1; --i) {
    const uint64_t m = i + 1;
    uint64_t x;
    do {
      uint64_t hi = rng.next_u32();
      x = (hi << 32) | rng.next_u32();
    } while (x >= m * (UINT64_MAX / m));
    std::swap(order[i], order[x % m]);
  }
  return order;
}

Batch naive_batch(const std::vector<int32_t>& all, const LoaderConfig& c, const LoaderState& s) {
  const uint64_t T = uint64_t(c.seq_len), S = (all.size() - 1) / T;
  const uint64_t G = uint64_t(c.batch) * c.world * c.accum;
  std::vector<uint64_t> order = naive_order(S, c.seed, s.epoch, c.shuffle);
  Batch b;
  for (int i = 0; i < c.batch; ++i) {
    uint64_t sample = order[s.step * G + (s.micro * c.world + c.rank) * c.batch + i];
    for (uint64_t t = 0; t < T; ++t) {
      b.tokens.push_back(all[sample * T + t]);
      b.targets.push_back(all[sample * T + t + 1]);
    }
  }
  return b;
}

LoaderState naive_advance(LoaderState s, const LoaderConfig& c, uint64_t steps_per_epoch) {
  if (++s.micro < uint64_t(c.accum)) return s;
  s.micro = 0;
  if (++s.step < steps_per_epoch) return s;
  s.step = 0;
  ++s.epoch;
  return s;
}

class LoaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tmp_ = std::make_unique<testutil::TempDir>("loader_" + testutil::current_test_name());
    dir_ = tmp_->path();
  }
  void TearDown() override { tmp_.reset(); }

  // A shard of n tokens; identity tokens (token i == i) make samples recognisable.
  std::shared_ptr<const TokenShard> make_shard(size_t n, bool identity = true) {
    tokens_.resize(n);
    Rng rng(77, 0);
    for (size_t i = 0; i < n; ++i)
      tokens_[i] = identity ? int32_t(i) : int32_t(rng.next_u32() % 1000);
    std::string path = (dir_ / "s.tok").string();
    uint32_t vocab = identity ? uint32_t(n) : 1000;
    EXPECT_TRUE(write_token_shard(path, tokens_.data(), n, vocab, 0).is_ok());
    auto shard = TokenShard::open(path);
    EXPECT_TRUE(shard.is_ok()) << shard.status().message();
    return std::make_shared<const TokenShard>(std::move(shard).value());
  }

  static std::unique_ptr<Loader> make_loader(std::shared_ptr<const TokenShard> shard,
                                             const LoaderConfig& cfg) {
    auto loader = Loader::create(std::move(shard), cfg);
    EXPECT_TRUE(loader.is_ok()) << loader.status().message();
    return std::move(loader).value();
  }

  static Batch take(Loader& loader) {
    const auto& c = loader.config();
    Batch b{std::vector<int32_t>(size_t(c.batch) * c.seq_len),
            std::vector<int32_t>(size_t(c.batch) * c.seq_len)};
    double waited = loader.next(b.tokens.data(), b.targets.data());
    EXPECT_GE(waited, 0.0);
    EXPECT_TRUE(std::isfinite(waited));
    return b;
  }

  static std::vector<Batch> take_n(Loader& loader, int n) {
    std::vector<Batch> out;
    for (int i = 0; i < n; ++i) out.push_back(take(loader));
    return out;
  }

  std::unique_ptr<testutil::TempDir> tmp_;
  fs::path dir_;
  std::vector<int32_t> tokens_;
};

TEST_F(LoaderTest, MatchesTheDocumentedOrder) {
  // 37 samples of T=8: with G = 8 an epoch has 4 steps and drops 5 samples.
  auto shard = make_shard(37 * 8 + 1, /*identity=*/false);
  for (bool shuffle : {false, true})
    for (int world : {1, 2})
      for (int accum : {1, 2})
        for (int rank = 0; rank < world; ++rank) {
          LoaderConfig cfg{.batch = 8 / (world * accum),
                           .seq_len = 8,
                           .seed = 5,
                           .rank = rank,
                           .world = world,
                           .accum = accum,
                           .shuffle = shuffle};
          SCOPED_TRACE(testing::Message() << "shuffle " << shuffle << " world " << world
                                          << " accum " << accum << " rank " << rank);
          auto loader = make_loader(shard, cfg);
          EXPECT_EQ(loader->samples_per_epoch(), 37u);
          ASSERT_EQ(loader->steps_per_epoch(), 37u / 8u);
          LoaderState expect;
          // Two and a half epochs.
          for (uint64_t i = 0; i < 10 * uint64_t(accum); ++i) {
            ASSERT_EQ(loader->state(), expect) << "call " << i;
            ASSERT_EQ(take(*loader), naive_batch(tokens_, cfg, expect)) << "call " << i;
            expect = naive_advance(expect, cfg, loader->steps_per_epoch());
          }
          EXPECT_EQ(expect.epoch, 2u);
        }
}

TEST_F(LoaderTest, TargetsAreTokensShiftedByOne) {
  auto shard = make_shard(1000);
  auto loader = make_loader(shard, {.batch = 3, .seq_len = 16, .seed = 1});
  for (const Batch& b : take_n(*loader, 5))
    for (size_t i = 0; i < b.tokens.size(); ++i) {
      ASSERT_EQ(b.targets[i], b.tokens[i] + 1);  // identity tokens
      ASSERT_EQ(b.tokens[i - i % 16] % 16, 0);   // rows start at a multiple of T
    }
}

// Sample ids of a batch, from identity tokens: a row starting at token s*T is sample s.
std::vector<uint64_t> sample_ids(const Batch& b, int T) {
  std::vector<uint64_t> ids;
  for (size_t i = 0; i < b.tokens.size(); i += size_t(T)) ids.push_back(uint64_t(b.tokens[i]) / T);
  return ids;
}

TEST_F(LoaderTest, EverySampleOncePerEpochAndEpochsDiffer) {
  const int T = 4;
  auto shard = make_shard(60 * T + 1);  // S = 60, G = 6: 10 steps, nothing dropped
  auto loader = make_loader(shard, {.batch = 3, .seq_len = T, .seed = 11, .accum = 2});
  ASSERT_EQ(loader->steps_per_epoch(), 10u);
  std::vector<std::vector<uint64_t>> epochs(3);
  for (auto& seen : epochs)
    for (int i = 0; i < 20; ++i)
      for (uint64_t id : sample_ids(take(*loader), T)) seen.push_back(id);
  for (const auto& seen : epochs) {
    std::vector<uint64_t> sorted = seen;
    std::sort(sorted.begin(), sorted.end());
    for (uint64_t i = 0; i < 60; ++i) ASSERT_EQ(sorted[i], i);
  }
  EXPECT_NE(epochs[0], epochs[1]);
  EXPECT_NE(epochs[1], epochs[2]);

  // Another seed gives another order; shuffle=false gives file order.
  auto other = make_loader(shard, {.batch = 3, .seq_len = T, .seed = 12, .accum = 2});
  std::vector<uint64_t> first;
  for (int i = 0; i < 20; ++i)
    for (uint64_t id : sample_ids(take(*other), T)) first.push_back(id);
  EXPECT_NE(first, epochs[0]);
  auto ordered = make_loader(shard, {.batch = 3, .seq_len = T, .shuffle = false});
  EXPECT_EQ(sample_ids(take(*ordered), T), (std::vector<uint64_t>{0, 1, 2}));
  EXPECT_EQ(sample_ids(take(*ordered), T), (std::vector<uint64_t>{3, 4, 5}));
}

TEST_F(LoaderTest, RanksOfWorldTwoSplitTheWorldOneGlobalBatch) {
  const int T = 4;
  auto shard = make_shard(50 * T + 1);
  // G = 4 in all three layouts.
  auto one = make_loader(shard, {.batch = 4, .seq_len = T, .seed = 3});
  std::vector<std::unique_ptr<Loader>> two, two_accum;
  for (int r = 0; r < 2; ++r) {
    two.push_back(make_loader(shard, {.batch = 2, .seq_len = T, .seed = 3, .rank = r, .world = 2}));
    two_accum.push_back(make_loader(
        shard, {.batch = 1, .seq_len = T, .seed = 3, .rank = r, .world = 2, .accum = 2}));
  }
  for (int step = 0; step < 30; ++step) {  // crosses two epoch boundaries (12 steps each)
    std::multiset<uint64_t> want, got, got_accum;
    for (uint64_t id : sample_ids(take(*one), T)) want.insert(id);
    for (auto& l : two)
      for (uint64_t id : sample_ids(take(*l), T)) got.insert(id);
    for (auto& l : two_accum)
      for (int m = 0; m < 2; ++m)
        for (uint64_t id : sample_ids(take(*l), T)) got_accum.insert(id);
    ASSERT_EQ(got, want) << "step " << step;
    ASSERT_EQ(got_accum, want) << "step " << step;
  }
}

TEST_F(LoaderTest, RestoreReproducesTheUninterruptedRun) {
  const int T = 4;
  auto shard = make_shard(23 * T + 1);  // S = 23, G = 4: 5 steps = 10 micro-batches per epoch
  const LoaderConfig cfg{.batch = 2, .seq_len = T, .seed = 9, .accum = 2};
  auto reference = make_loader(shard, cfg);
  std::vector<LoaderState> states;
  std::vector<Batch> batches;
  for (int i = 0; i < 32; ++i) {
    states.push_back(reference->state());
    batches.push_back(take(*reference));
  }
  ASSERT_EQ(states[10], (LoaderState{1, 0, 0}));  // the first epoch boundary

  // Cut mid-step, mid-epoch, exactly at the epoch boundary and just after it.
  for (int cut : {3, 6, 10, 11, 17}) {
    SCOPED_TRACE(testing::Message() << "cut " << cut);
    auto run = make_loader(shard, cfg);
    take_n(*run, cut);
    const LoaderState s = run->state();
    ASSERT_EQ(s, states[cut]);
    // The saved state goes through a checkpoint manifest.
    auto parsed = loader_state_from_json(nlohmann::json::parse(to_json(s).dump()));
    ASSERT_TRUE(parsed.is_ok()) << parsed.status().message();
    ASSERT_EQ(*parsed, s);

    // Same loader: run ahead (its prefetch is now of a later batch), then rewind.
    take_n(*run, 7);
    ASSERT_TRUE(run->restore(*parsed).is_ok());
    EXPECT_EQ(run->state(), s);
    for (int i = cut; i < 32; ++i) ASSERT_EQ(take(*run), batches[i]) << "same loader, batch " << i;

    // A fresh loader, as after a restart.
    auto fresh = make_loader(shard, cfg);
    ASSERT_TRUE(fresh->restore(*parsed).is_ok());
    for (int i = cut; i < 32; ++i)
      ASSERT_EQ(take(*fresh), batches[i]) << "fresh loader, batch " << i;
  }
}

TEST_F(LoaderTest, RestoreRacingThePrefetchIsSafe) {
  // Restores land while the background thread is idle, mid-fill, or about to
  // publish; every next() must still return the batch of the restored position.
  // Long rows make a fill take long enough for restores to land inside it.
  const int T = 2048;
  auto shard = make_shard(80 * T + 1);
  const LoaderConfig cfg{.batch = 8, .seq_len = T, .seed = 2};
  auto reference = make_loader(shard, cfg);
  std::vector<LoaderState> states;
  std::vector<Batch> batches;
  for (int i = 0; i < 30; ++i) {  // 10 steps per epoch: three epochs
    states.push_back(reference->state());
    batches.push_back(take(*reference));
  }
  auto loader = make_loader(shard, cfg);
  Rng rng(5, 5);
  for (int round = 0; round < 1000; ++round) {
    int at = int(rng.next_u32() % 29);
    ASSERT_TRUE(loader->restore(states[rng.next_u32() % 30]).is_ok());  // often superseded at once
    ASSERT_TRUE(loader->restore(states[at]).is_ok());
    ASSERT_EQ(take(*loader), batches[at]) << "round " << round;
    ASSERT_EQ(loader->state(), states[at + 1]);
  }
}

TEST_F(LoaderTest, RestoreRejectsAPositionOfAnotherConfig) {
  auto shard = make_shard(23 * 4 + 1);
  auto loader = make_loader(shard, {.batch = 2, .seq_len = 4, .accum = 2});  // 5 steps/epoch
  take(*loader);
  const LoaderState before = loader->state();
  Status s = loader->restore({0, 5, 0});
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("has 5 steps"), std::string::npos) << s.message();
  EXPECT_FALSE(loader->restore({0, 1, 2}).is_ok());
  EXPECT_EQ(loader->state(), before);
}

TEST_F(LoaderTest, TooSmallShardIsAnError) {
  const int T = 256;
  auto shard = make_shard(8 * T);  // 7 samples; a global batch of 8 needs 8*256+1 tokens
  auto loader = Loader::create(shard, {.batch = 8, .seq_len = T});
  ASSERT_FALSE(loader.is_ok());
  const std::string& msg = loader.status().message();
  EXPECT_EQ(msg.rfind("[data] shard " + shard->path(), 0), 0u) << msg;
  EXPECT_NE(msg.find("need 2049 tokens, the shard has 2048"), std::string::npos) << msg;

  auto exact = make_shard(8 * T + 1);
  EXPECT_TRUE(Loader::create(exact, {.batch = 8, .seq_len = T}).is_ok());
  EXPECT_FALSE(Loader::create(exact, {.batch = 4, .seq_len = T, .world = 2, .accum = 2}).is_ok());
}

TEST_F(LoaderTest, ImpossibleConfigIsAnError) {
  auto shard = make_shard(1000);
  EXPECT_FALSE(Loader::create(shard, {.batch = 2, .seq_len = 4, .rank = 2, .world = 2}).is_ok());
  EXPECT_FALSE(Loader::create(shard, {.batch = 0, .seq_len = 4}).is_ok());
  EXPECT_FALSE(Loader::create(shard, {.batch = 2, .seq_len = 4, .accum = 0}).is_ok());
  EXPECT_FALSE(Loader::create(nullptr, {}).is_ok());
}

TEST(LoaderState, JsonRoundTripAndErrors) {
  LoaderState s{3, 17, 1};
  nlohmann::json j = to_json(s);
  EXPECT_EQ(j, nlohmann::json::parse(R"({"epoch": 3, "step": 17, "micro": 1})"));
  auto back = loader_state_from_json(j);
  ASSERT_TRUE(back.is_ok());
  EXPECT_EQ(*back, s);
  auto signed_ints =
      loader_state_from_json(nlohmann::json{{"epoch", 1}, {"step", 2}, {"micro", 0}});
  ASSERT_TRUE(signed_ints.is_ok());
  EXPECT_EQ(*signed_ints, (LoaderState{1, 2, 0}));

  auto missing = loader_state_from_json(nlohmann::json::parse(R"({"epoch": 3, "micro": 1})"));
  ASSERT_FALSE(missing.is_ok());
  EXPECT_EQ(missing.status().message(), "[data] loader state: missing 'step'");
  auto negative =
      loader_state_from_json(nlohmann::json::parse(R"({"epoch": 0, "step": -1, "micro": 0})"));
  ASSERT_FALSE(negative.is_ok());
  EXPECT_NE(negative.status().message().find("'step' must be a non-negative integer, got -1"),
            std::string::npos);
  EXPECT_FALSE(
      loader_state_from_json(nlohmann::json::parse(R"({"epoch": "0", "step": 0, "micro": 0})"))
          .is_ok());
  EXPECT_FALSE(loader_state_from_json(nlohmann::json::parse(R"([0, 0, 0])")).is_ok());
}

}  // namespace
}  // namespace crucible::data
