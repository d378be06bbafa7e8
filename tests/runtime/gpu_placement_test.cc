// Ranks onto GPUs (runtime/gpu_placement.h): local order, sharing only when
// asked, tensor-parallel groups inside a node; refusals in one line.
#include "runtime/gpu_placement.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace crucible::runtime {
namespace {

std::vector<std::string> hosts(std::initializer_list<std::pair<const char*, int>> spec) {
  std::vector<std::string> h;
  for (auto [name, n] : spec)
    for (int i = 0; i < n; ++i) h.push_back(name);
  return h;
}

TEST(GpuPlacement, TwoDgxNodesGiveEachRankItsOwnGpu) {
  const auto h = hosts({{"dgx-a", 8}, {"dgx-b", 8}});
  auto p = place_on_gpus(h, std::vector<int>(16, 8), /*tp=*/8, /*pinned=*/-1, /*share=*/false);
  ASSERT_TRUE(p.is_ok()) << p.status().message();
  EXPECT_FALSE(p->shared);
  for (int r = 0; r < 16; ++r) EXPECT_EQ(p->gpu[size_t(r)], r % 8) << r;
  EXPECT_EQ(p->sharing, std::vector<int>(16, 1));
}

TEST(GpuPlacement, RanksInterleavedOverHostsCountLocally) {
  // srun's cyclic distribution: ranks alternate hosts.
  const std::vector<std::string> h = {"a", "b", "a", "b"};
  auto p = place_on_gpus(h, {2, 2, 2, 2}, 1, -1, false);
  ASSERT_TRUE(p.is_ok());
  EXPECT_EQ(p->gpu, (std::vector<int>{0, 0, 1, 1}));
}

TEST(GpuPlacement, MoreRanksThanGpusIsRefusedUnlessShared) {
  const auto h = hosts({{"gpu-box", 4}});
  auto refused = place_on_gpus(h, {1, 1, 1, 1}, 2, -1, false);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.status().message(),
            "[launch] 4 ranks on host gpu-box need 4 GPUs, it has 1: use fewer ranks per host, or "
            "dist.share_gpus = true to share them (staged collectives, for tests)");
  auto shared = place_on_gpus(h, {2, 2, 2, 2}, 2, -1, true);
  ASSERT_TRUE(shared.is_ok());
  EXPECT_TRUE(shared->shared);
  EXPECT_EQ(shared->gpu, (std::vector<int>{0, 1, 0, 1}));
  EXPECT_EQ(shared->sharing, (std::vector<int>{2, 2, 2, 2})) << "their memory checks count both";
  // Exactly as many ranks as GPUs: nothing shared.
  auto exact = place_on_gpus(hosts({{"gpu-box", 2}}), {2, 2}, 1, -1, true);
  ASSERT_TRUE(exact.is_ok());
  EXPECT_FALSE(exact->shared);
}

TEST(GpuPlacement, APinnedIndexPutsEveryRankOfAHostOnIt) {
  const auto h = hosts({{"one-gpu", 2}});
  auto refused = place_on_gpus(h, {1, 1}, 1, 0, false);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.status().message().find("puts 2 ranks of host one-gpu on one GPU"),
            std::string::npos);
  auto shared = place_on_gpus(h, {1, 1}, 1, 0, true);
  ASSERT_TRUE(shared.is_ok());
  EXPECT_EQ(shared->gpu, (std::vector<int>{0, 0}));
  EXPECT_TRUE(shared->shared);
  auto past = place_on_gpus(hosts({{"box", 1}}), {2}, 1, 3, false);
  ASSERT_FALSE(past.is_ok());
  EXPECT_EQ(past.status().message(), "[launch] run.device = cuda:3, but host box has 2 GPU(s)");
}

TEST(GpuPlacement, ATensorParallelGroupAcrossHostsIsRefused) {
  // 6 ranks, 3 per host, tp = 2: ranks 2 and 3 form a group across the hosts.
  const auto h = hosts({{"n1", 3}, {"n2", 3}});
  auto p = place_on_gpus(h, std::vector<int>(6, 4), 2, -1, false);
  ASSERT_FALSE(p.is_ok());
  EXPECT_EQ(p.status().message(),
            "[launch] tensor-parallel group of ranks 2..3 spans hosts n1 and n2: tp = 2 must stay "
            "inside a node "
            "(give each host a multiple of tp ranks)");
  EXPECT_TRUE(place_on_gpus(h, std::vector<int>(6, 4), 3, -1, false).is_ok());
}

TEST(GpuPlacement, AHostWithoutGpusIsNamed) {
  auto p = place_on_gpus({"a", "cpu-only"}, {1, 0}, 1, -1, false);
  ASSERT_FALSE(p.is_ok());
  EXPECT_EQ(p.status().message(), "[launch] rank 1's host cpu-only has no GPU");
}

TEST(GpuPlacement, OneProcessGathersItself) {
  auto comm = comm::make_single_comm();
  auto p = place_ranks_on_gpus(*comm, 8, 1, -1, false);
  ASSERT_TRUE(p.is_ok());
  EXPECT_EQ(p->gpu, std::vector<int>{0});
}

}  // namespace
}  // namespace crucible::runtime
