// The layout value: coordinates (tp fastest), groups that partition the world
// for every layout up to 8 ranks, and each constraint refused with one line
// naming it.
#include "parallel/layout.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>

#include <set>

#include "runtime/config.h"

namespace crucible::parallel {
namespace {

nn::GPTConfig model(int layers = 4, int heads = 4, int embd = 256) {
  nn::GPTConfig m;
  m.n_layer = layers, m.n_head = heads, m.n_embd = embd;
  return m;
}

TEST(Layout, EveryGridUpToEightRanksPartitionsTheWorld) {
  int layouts = 0;
  for (int world = 1; world <= 8; ++world)
    for (int tp = 1; tp <= world; ++tp)
      for (int pp = 1; pp * tp <= world; ++pp) {
        if (world % (tp * pp) != 0) continue;
        auto l = Layout::make({tp, pp, 1, "1f1b"}, world, model(840, 840, 840), 8);
        ASSERT_TRUE(l) << l.status().message();
        ASSERT_EQ(l->dp() * l->tp() * l->pp(), world);
        ++layouts;
        for (auto group : {&Layout::tp_group, &Layout::pp_group, &Layout::dp_group}) {
          std::set<int> seen;
          std::set<std::vector<int>> groups;
          for (int r = 0; r < world; ++r) {
            EXPECT_EQ(l->rank_of(l->coords(r)), r);
            const std::vector<int> g = (*l.*group)(r);
            EXPECT_NE(std::find(g.begin(), g.end(), r), g.end());
            groups.insert(g);
            for (int m : g) EXPECT_EQ((*l.*group)(m), g) << "a group is the same seen from each member";
          }
          for (const auto& g : groups)
            for (int m : g) EXPECT_TRUE(seen.insert(m).second) << "rank " << m << " in two groups";
          EXPECT_EQ(int(seen.size()), world);
        }
        // tp varies fastest: a TP group is consecutive ranks.
        for (int r = 0; r < world; ++r) {
          const std::vector<int> g = l->tp_group(r);
          for (size_t i = 1; i < g.size(); ++i) EXPECT_EQ(g[i], g[i - 1] + 1);
        }
      }
  EXPECT_EQ(layouts, 1 + 3 + 3 + 6 + 3 + 9 + 3 + 10);  // sum over world of ordered (tp, pp) dividing it
}

TEST(Layout, TensorParallelGroupsAcrossHostsAreNamed) {
  auto l = Layout::make({2, 1, 1, "1f1b"}, 4, model(), 4);  // dp=2 tp=2: groups {0,1}, {2,3}
  ASSERT_TRUE(l);
  // Two slots per host: each group inside one host.
  EXPECT_EQ(tp_hosts_warning(*l, {"a", "a", "b", "b"}), "");
  // One or three slots per host: a group spans two hosts, the first such named.
  EXPECT_EQ(tp_hosts_warning(*l, {"a", "b", "c", "d"}),
            "[dist] warning: the tensor-parallel group of ranks 0-1 spans hosts a, b: its allreduces cross the "
            "network every block; give each host a multiple of dist.tp = 2 slots (ranks fill hosts in order)");
  const std::string w = tp_hosts_warning(*l, {"a", "a", "a", "b"});
  EXPECT_NE(w.find("ranks 2-3 spans hosts a, b"), std::string::npos) << w;
  // tp = 1: nothing to place.
  auto d = Layout::make({1, 1, 1, "1f1b"}, 4, model(), 4);
  ASSERT_TRUE(d);
  EXPECT_EQ(tp_hosts_warning(*d, {"a", "b", "c", "d"}), "");
}

TEST(Layout, CoordinatesAreDpPpTpWithTpFastest) {
  auto l = Layout::make({2, 2, 1, "1f1b"}, 8, model(), 4);
  ASSERT_TRUE(l);
  EXPECT_EQ(l->dp(), 2);
  const Coords c = l->coords(6);  // 6 = (1 * 2 + 1) * 2 + 0
  EXPECT_EQ(c.dp, 1);
  EXPECT_EQ(c.pp, 1);
  EXPECT_EQ(c.tp, 0);
  EXPECT_EQ(l->tp_group(6), (std::vector<int>{6, 7}));
  EXPECT_EQ(l->pp_group(6), (std::vector<int>{4, 6}));
  EXPECT_EQ(l->dp_group(6), (std::vector<int>{2, 6}));
  EXPECT_EQ(l->describe(), "dp=2 tp=2 pp=2 (v=1, 1f1b)");
}

TEST(Layout, EachConstraintIsOneLineNamingIt) {
  struct Case {
    LayoutSpec spec;
    int world;
    nn::GPTConfig m;
    int micro;
    std::string needle;
  };
  for (const Case& c : std::vector<Case>{
           {{2, 2, 1, "1f1b"}, 6, model(), 4, "2 x 2 does not divide the world of 6 ranks"},
           {{3, 1, 1, "1f1b"}, 3, model(4, 4, 258), 4, "model.n_head = 4 does not divide by tp = 3"},
           {{3, 1, 1, "1f1b"}, 3, model(4, 3, 250), 4, "4 x model.n_embd = 1000 does not divide by tp = 3"},
           {{8, 1, 1, "1f1b"}, 8, model(4, 8, 251), 4, "does not divide by tp = 8"},
           {{1, 3, 1, "1f1b"}, 3, model(4), 4, "model.n_layer = 4 does not split over pp x pp_virtual = 3 stages"},
           {{1, 2, 2, "interleaved"}, 2, model(6), 4, "does not split over pp x pp_virtual = 4 stages"},
           {{1, 2, 2, "1f1b"}, 2, model(8), 4, "need dist.pp_schedule = \"interleaved\""},
           {{1, 4, 1, "1f1b"}, 4, model(4), 2, "2 micro-batches are fewer than pp = 4"},
           {{1, 2, 2, "interleaved"}, 2, model(8), 3, "3 micro-batches are not a multiple of pp = 2"},
           {{1, 2, 1, "gpipe"}, 2, model(4), 4, "'gpipe' is not one of 1f1b, interleaved, zb-h1"},
           {{0, 1, 1, "1f1b"}, 1, model(4), 4, "dist.tp: 0 must be >= 1"},
       }) {
    auto l = Layout::make(c.spec, c.world, c.m, c.micro);
    ASSERT_FALSE(l) << c.needle;
    EXPECT_EQ(l.status().code(), Code::kInvalidArgument);
    EXPECT_NE(l.status().message().find(c.needle), std::string::npos) << l.status().message();
    EXPECT_EQ(l.status().message().rfind("[layout] ", 0), 0u) << l.status().message();
  }
  // Vocabularies that do not divide by tp are allowed (vocab-parallel pads).
  nn::GPTConfig odd = model();
  odd.vocab_size = 50257;
  EXPECT_TRUE(Layout::make({2, 1, 1, "1f1b"}, 2, odd, 1));
}

TEST(Layout, ConfigKeysAreCheckedWithTheModel) {
  auto ok = runtime::load_config("", {"dist.tp=2", "dist.pp=2", "train.grad_accum=2"});
  ASSERT_TRUE(ok) << ok.status().message();
  EXPECT_EQ(ok->dist.tp, 2);
  auto bad = runtime::load_config("", {"dist.pp=3"});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.status().message().find("[config] dist.pp: model.n_layer = 4 does not split"), std::string::npos)
      << bad.status().message();
  auto sched = runtime::load_config("", {"dist.pp_schedule=zb-h2"});
  ASSERT_FALSE(sched);
  EXPECT_NE(sched.status().message().find("dist.pp_schedule: 'zb-h2'"), std::string::npos);
}

// The cost split is the best contiguous one: checked against every
// composition of n_layer into the stages, for models where the LM head is
// cheap, comparable to a block, and several blocks' worth (GPT-2 124M at
// seq_len 64: 5.4 blocks, so two stages take 9 and 3 + the head).
TEST(Layout, CostSplitIsTheBestContiguousOne) {
  const nn::GPTConfig gpt2{12, 12, 768, 50304, 64};
  EXPECT_EQ(cost_balanced_blocks(gpt2, 2), (std::vector<int>{9, 3}));
  auto cost = [](const nn::GPTConfig& m, const std::vector<int>& counts) {
    const double C = m.n_embd, T = m.seq_len, V = m.vocab_size;
    double worst = 0;
    for (size_t s = 0; s < counts.size(); ++s)
      worst = std::max(worst, counts[s] * (24 * C * C + 2 * T * C) + (s + 1 == counts.size() ? 2 * C * V + 5 * V : 0));
    return worst;
  };
  for (const nn::GPTConfig& m : {gpt2, nn::GPTConfig{7, 4, 32, 512, 32}, nn::GPTConfig{10, 2, 16, 64, 8},
                                 nn::GPTConfig{9, 8, 256, 8192, 256}})
    for (int stages = 1; stages <= std::min(m.n_layer, 5); ++stages) {
      const std::vector<int> got = cost_balanced_blocks(m, stages);
      ASSERT_EQ(int(got.size()), stages);
      int sum = 0;
      for (int n : got) {
        EXPECT_GE(n, 1);
        sum += n;
      }
      EXPECT_EQ(sum, m.n_layer);
      // Brute force: every composition of n_layer into `stages` positive parts.
      double best = 1e300;
      std::vector<int> c(size_t(stages), 1);
      std::function<void(int, int)> go = [&](int s, int left) {
        if (s == stages - 1) {
          c[size_t(s)] = left;
          best = std::min(best, cost(m, c));
          return;
        }
        for (int k = 1; k <= left - (stages - s - 1); ++k) c[size_t(s)] = k, go(s + 1, left - k);
      };
      go(0, m.n_layer);
      EXPECT_DOUBLE_EQ(cost(m, got), best) << "L=" << m.n_layer << " stages=" << stages;
    }
  // Through the layout: contiguous stages covering every block once.
  auto l = Layout::make({1, 2, 1, "1f1b", false, "cost"}, 2, gpt2, 4);
  ASSERT_TRUE(l) << l.status().message();
  EXPECT_EQ(l->stage_blocks(gpt2, 0).last, 9);
  EXPECT_EQ(l->stage_blocks(gpt2, 1).first, 9);
  EXPECT_EQ(l->stage_blocks(gpt2, 1).last, 12);
  // Uneven counts need the cost split; fewer blocks than stages never work.
  EXPECT_FALSE(Layout::make({1, 2, 1, "1f1b", false, "even"}, 2, nn::GPTConfig{7, 4, 32, 512, 32}, 4));
  EXPECT_TRUE(Layout::make({1, 2, 1, "1f1b", false, "cost"}, 2, nn::GPTConfig{7, 4, 32, 512, 32}, 4));
  EXPECT_FALSE(Layout::make({1, 4, 1, "1f1b", false, "cost"}, 4, nn::GPTConfig{3, 4, 32, 512, 32}, 4));
  EXPECT_FALSE(Layout::make({1, 2, 1, "1f1b", false, "thirds"}, 2, gpt2, 4));
}

}  // namespace
}  // namespace crucible::parallel
