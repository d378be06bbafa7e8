// The NCCL Comm on a real GPU (comm/device_comm.h): a world-1 communicator runs
// every collective on device buffers, and each result is compared with the
// host Comm's on the same data (the MPI implementation's semantics: at world
// 1, a reduction leaves the data, a scatter or gather copies its piece). The
// staged Comm, on the same GPU, must agree too. Label `gpu`: skipped, saying
// why, where there is no GPU. Several ranks: the platform issue's layouts.
#include <gtest/gtest.h>

#include <vector>

#include "comm/device_comm.h"
#include "core/rng.h"
#include "gpu/gpu_support.h"

namespace crucible {
namespace {

std::vector<float> random(size_t n, uint64_t seed) {
  std::vector<float> v(n);
  Rng(seed, 0).fill_uniform(v.data(), n, -1.0f, 1.0f);
  return v;
}

// Every collective of one Comm on device buffers against the host Comm.
void check_every_collective(comm::Comm& dev, comm::Comm& host) {
  using gpu_test::DeviceBuffer;
  for (size_t n : {size_t{1}, size_t{4097}, size_t{1} << 20}) {
    auto x = random(n, n);
    DeviceBuffer<float> d(x);
    ASSERT_TRUE(host.allreduce(x.data(), n).is_ok());
    ASSERT_TRUE(dev.allreduce(d.get(), n).is_ok());
    EXPECT_EQ(d.host(), x) << "allreduce " << n;
    comm::Request r = dev.iallreduce(d.get(), n, comm::ReduceOp::kMax);
    ASSERT_TRUE(r.wait().is_ok());
    EXPECT_EQ(d.host(), x) << "iallreduce max " << n;
  }
  auto full = random(1000, 5);
  DeviceBuffer<float> ds(full), dr(1000);
  ASSERT_TRUE(dev.reduce_scatter(ds.get(), dr.get(), {1000}).is_ok());
  EXPECT_EQ(dr.host(), full);
  ASSERT_TRUE(dev.reduce_scatter(ds.get(), ds.get(), {1000}).is_ok());  // in place
  EXPECT_EQ(ds.host(), full);
  DeviceBuffer<float> dg(1000);
  ASSERT_TRUE(dev.iallgather(ds.get(), dg.get(), {1000}).wait().is_ok());
  EXPECT_EQ(dg.host(), full);
  std::vector<double> norm = {2.5, -1.0};
  DeviceBuffer<double> dn(norm);
  ASSERT_TRUE(dev.allreduce(dn.get(), 2).is_ok());
  EXPECT_EQ(dn.host(), norm);
  std::vector<bf16> pieces(64);
  for (size_t i = 0; i < pieces.size(); ++i) pieces[i].bits = uint16_t(i * 3);
  DeviceBuffer<bf16> bs(pieces), br(64);
  ASSERT_TRUE(dev.ialltoall_pieces(bs.get(), br.get(), {64}).wait().is_ok());
  auto got = br.host();
  for (size_t i = 0; i < 64; ++i) EXPECT_EQ(got[i].bits, pieces[i].bits) << i;
  ASSERT_TRUE(dev.iallgather_pieces(br.get(), {64}).wait().is_ok());
  std::vector<char> bytes(300, 'q');
  DeviceBuffer<char> db(bytes), dall(300);
  ASSERT_TRUE(dev.broadcast(db.get(), 300, 0).is_ok());
  ASSERT_TRUE(dev.allgather_bytes(db.get(), 300, dall.get()).is_ok());
  EXPECT_EQ(dall.host(), bytes);
  // Send to itself and receive, as one sendrecv.
  DeviceBuffer<float> dsr(1000);
  ASSERT_TRUE(dev.sendrecv(ds.get(), 4000, 0, dsr.get(), 4000, 0, 1).is_ok());
  EXPECT_EQ(dsr.host(), full);
  // Host buffers go to the host Comm.
  std::vector<float> h = {1, 2, 3};
  ASSERT_TRUE(dev.allreduce(h.data(), 3).is_ok());
  EXPECT_EQ(h, (std::vector<float>{1, 2, 3}));
  auto sub = dev.split(0, 0);
  ASSERT_TRUE(sub.is_ok()) << sub.status().message();
  DeviceBuffer<float> d1(full);
  ASSERT_TRUE((*sub)->allreduce(d1.get(), 1000).is_ok());
  EXPECT_EQ(d1.host(), full);
}

TEST(GpuNccl, WorldOfOneRunsEveryCollectiveAsTheHostComm) {
  REQUIRE_GPU();
  auto host = comm::make_single_comm();
  auto nccl = comm::make_nccl_comm(*host, 0, nullptr);
  ASSERT_TRUE(nccl.is_ok()) << nccl.status().message();
  EXPECT_EQ((*nccl)->backend(), "nccl");
  check_every_collective(**nccl, *host);
}

TEST(GpuNccl, TheStagedPathOnTheSameGpuAgrees) {
  REQUIRE_GPU();
  auto host = comm::make_single_comm();
  auto memory = comm::cuda_device_memory(0, nullptr);
  ASSERT_TRUE(memory.is_ok()) << memory.status().message();
  auto staged = comm::make_staged_comm(*host, std::move(*memory));
  check_every_collective(*staged, *host);
}

}  // namespace
}  // namespace crucible
