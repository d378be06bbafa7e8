// The device Comms' host-side logic in one process: NCCL's errors in words,
// the unique-id bootstrap, the path choice, and the staged Comm on a fake GPU
// (its MPI ranks: tests/mpi/comm_staged_mpi.cc; NCCL on a GPU:
// tests/gpu/gpu_nccl_test.cc).
#include "comm/device_comm.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "kernels/cuda/cuda.h"
#include "support/fake_device_memory.h"

namespace crucible::comm {
namespace {

TEST(NcclErrors, EveryResultIsNamedWithItsMeaning) {
  EXPECT_EQ(detail::nccl_result_text(0), "ncclSuccess");
  EXPECT_NE(detail::nccl_result_text(1).find("ncclUnhandledCudaError (a CUDA call"),
            std::string::npos);
  EXPECT_NE(detail::nccl_result_text(2).find("ncclSystemError"), std::string::npos);
  EXPECT_NE(detail::nccl_result_text(6).find("ncclRemoteError (a peer rank failed"),
            std::string::npos);
  EXPECT_NE(detail::nccl_result_text(42).find("ncclResult 42 (unknown"), std::string::npos);
  // Distinct texts: a user can tell the causes apart.
  for (int a = 0; a <= 7; ++a)
    for (int b = a + 1; b <= 7; ++b)
      EXPECT_NE(detail::nccl_result_text(a), detail::nccl_result_text(b));
  EXPECT_EQ(detail::nccl_error("allreduce", "ncclAllReduce", 3, 8, 6, "socket closed"),
            "[dist] allreduce: ncclAllReduce failed on rank 3 of 8: " +
                detail::nccl_result_text(6) + ": socket closed");
  EXPECT_EQ(detail::nccl_error("split", "ncclCommSplit", 0, 2, 5, ""),
            "[dist] split: ncclCommSplit failed on rank 0 of 2: " + detail::nccl_result_text(5));
}

TEST(NcclBootstrap, RankZerosIdOrItsError) {
  auto comm = make_single_comm();
  unsigned char id[128] = {0};
  int calls = 0;
  ASSERT_TRUE(detail::share_unique_id(*comm, id, sizeof(id), [&](void* p) {
                ++calls;
                std::memset(p, 0xab, 128);
                return Status::ok();
              }).is_ok());
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(id[0], 0xab);
  EXPECT_EQ(id[127], 0xab);
  Status s = detail::share_unique_id(*comm, id, sizeof(id),
                                     [](void*) { return Status::internal("no network"); });
  EXPECT_FALSE(s.is_ok());
  EXPECT_EQ(s.message(), "no network");
}

TEST(DevicePath, OneRankIsNccl) {
  auto comm = make_single_comm();
  auto path = choose_device_path(*comm, "0000:19:00.0");
  ASSERT_TRUE(path.is_ok()) << path.status().message();
  EXPECT_EQ(*path, DevicePath::kNccl);
  EXPECT_STREQ(path_name(DevicePath::kStaged), "staged");
}

TEST(NcclComm, WithoutAGpuSaysSoInOneLine) {
  if (kernels::cuda::device_count() > 0)
    GTEST_SKIP() << "a GPU is present: tests/gpu/gpu_nccl_test.cc runs NCCL";
  auto comm = make_single_comm();
  auto nccl = make_nccl_comm(*comm, 0, nullptr);
  ASSERT_FALSE(nccl.is_ok());
  const std::string m = nccl.status().message();
  EXPECT_EQ(m.rfind("[dist] ", 0), 0u) << m;
  EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  auto mem = cuda_device_memory(0, nullptr);
  EXPECT_FALSE(mem.is_ok());
}

TEST(StagedComm, CopiesDeviceBuffersAroundTheHostCallAndReusesItsStaging) {
  auto single = make_single_comm();
  testing::FakeDeviceCounts counts;
  auto memory = std::make_shared<testing::FakeDeviceMemory>(size_t{1} << 20, &counts);
  auto staged = make_staged_comm(*single, memory);
  EXPECT_EQ(staged->backend(), "single+staged");
  float* d = memory->alloc<float>(1000);
  for (int i = 0; i < 1000; ++i) d[i] = float(i) * 0.5f;
  for (int round = 0; round < 3; ++round) ASSERT_TRUE(staged->allreduce(d, 1000).is_ok());
  EXPECT_EQ(counts.to_host, 3u);
  EXPECT_EQ(counts.to_device, 3u);
  EXPECT_EQ(counts.pinned_allocs, 1u) << "the staging buffer is kept for the next call";
  EXPECT_EQ(d[999], 999 * 0.5f);
  // Host buffers go to the host Comm untouched: no copies.
  std::vector<float> h(10, 1.0f);
  ASSERT_TRUE(staged->allreduce(h.data(), h.size()).is_ok());
  EXPECT_EQ(counts.to_host, 3u);
  // Two requests in flight hold two buffers; waiting returns them.
  float* e = memory->alloc<float>(1000);
  Request a = staged->iallreduce(d, 1000), b = staged->iallreduce(e, 1000);
  ASSERT_TRUE(a.wait().is_ok());
  ASSERT_TRUE(b.wait().is_ok());
  EXPECT_EQ(counts.pinned_allocs, 2u);
  // An in-place all-gather of one rank: the piece lands where it was.
  ASSERT_TRUE(staged->allgather(d, d, {1000}).is_ok());
  EXPECT_EQ(d[10], 5.0f);
  // Split keeps staging.
  auto sub = staged->split(0, 0);
  ASSERT_TRUE(sub.is_ok());
  ASSERT_TRUE((*sub)->allreduce(d, 4).is_ok());
  EXPECT_EQ((*sub)->backend(), "single+staged");
  staged.reset();
  sub->reset();
  EXPECT_EQ(counts.pinned_frees, counts.pinned_allocs)
      << "every pinned buffer is freed with the last Comm";
}

TEST(StagedComm, ErrorsOfTheCallAreTheHostCommsOwn) {
  auto single = make_single_comm();
  testing::FakeDeviceCounts counts;
  auto memory = std::make_shared<testing::FakeDeviceMemory>(size_t{1} << 16, &counts);
  auto staged = make_staged_comm(*single, memory);
  float* d = memory->alloc<float>(8);
  Status s = staged->reduce_scatter(d, d, {4, 4});  // two counts for one rank
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("2 counts for a world of 1 ranks"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace crucible::comm
