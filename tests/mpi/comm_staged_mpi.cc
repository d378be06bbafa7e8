// The staged device Comm over real MPI ranks (2 and 4), its "GPU" a fake
// arena of host memory (support/fake_device_memory.h): every collective and
// point-to-point call on device buffers must give the MPI Comm's bits on host
// buffers, and the NCCL bootstrap must carry rank 0's id (or its error) to
// every rank; placement on a machine without GPUs refuses every rank alike.
// On a real GPU: tests/gpu/gpu_nccl_test.cc.
#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "comm/comm.h"
#include "comm/device_comm.h"
#include "core/rng.h"
#include "kernels/cuda/cuda.h"
#include "runtime/gpu_world.h"
#include "support/fake_device_memory.h"

namespace crucible::comm {
namespace {

Comm& host() { return **world(); }

std::vector<float> data(size_t n, uint64_t seed) {
  std::vector<float> v(n);
  Rng rng(seed, uint64_t(host().rank()));
  if (n > 0) rng.fill_uniform(v.data(), n, -1.0f, 1.0f);
  return v;
}

struct Fixture {
  testing::FakeDeviceCounts counts;
  std::shared_ptr<testing::FakeDeviceMemory> memory =
      std::make_shared<testing::FakeDeviceMemory>(size_t{16} << 20, &counts);
  std::unique_ptr<Comm> staged = make_staged_comm(host(), memory);
  template <typename T>
  T* upload(const std::vector<T>& v) {
    T* d = memory->alloc<T>(v.size());
    if (!v.empty()) std::memcpy(d, v.data(), v.size() * sizeof(T));
    return d;
  }
};

template <typename T>
std::vector<T> download(const T* d, size_t n) {
  return std::vector<T>(d, d + n);
}

std::vector<size_t> uneven_counts(size_t base) {
  std::vector<size_t> c;
  for (int r = 0; r < host().size(); ++r) c.push_back(base + size_t(r) * 3 + (r == 1 ? 0 : 1));
  c[0] = 0;  // an empty piece, as ZeRO's shards can have
  return c;
}

TEST(StagedMpi, AllreduceEqualsTheHostCommBitwise) {
  Fixture f;
  for (size_t n : {size_t{1}, size_t{1000}, size_t{70000}}) {
    auto x = data(n, 11 + n);
    float* d = f.upload(x);
    ASSERT_TRUE(host().allreduce(x.data(), n).is_ok());
    ASSERT_TRUE(f.staged->allreduce(d, n).is_ok());
    EXPECT_EQ(download(d, n), x) << n;
  }
  // Non-blocking, several in flight (a data-parallel step's buckets), max too.
  auto a = data(5000, 3), b = data(3000, 4);
  float *da = f.upload(a), *db = f.upload(b);
  Request ra = f.staged->iallreduce(da, a.size()),
          rb = f.staged->iallreduce(db, b.size(), ReduceOp::kMax);
  ASSERT_TRUE(host().allreduce(a.data(), a.size()).is_ok());
  ASSERT_TRUE(host().allreduce(b.data(), b.size(), ReduceOp::kMax).is_ok());
  while (!rb.test()) {
  }
  ASSERT_TRUE(rb.wait().is_ok());
  ASSERT_TRUE(ra.wait().is_ok());
  EXPECT_EQ(download(da, a.size()), a);
  EXPECT_EQ(download(db, b.size()), b);
  std::vector<double> norms = {double(host().rank()) + 0.25, 2.0};
  double* dn = f.upload(norms);
  ASSERT_TRUE(f.staged->allreduce(dn, 2).is_ok());
  ASSERT_TRUE(host().allreduce(norms.data(), 2).is_ok());
  EXPECT_EQ(download(dn, 2), norms);
}

TEST(StagedMpi, ReduceScatterAndAllgatherUnevenInPlaceAndNot) {
  Fixture f;
  const auto counts = uneven_counts(17);
  size_t total = 0, offset = 0;
  for (int r = 0; r < host().size(); ++r) {
    if (r == host().rank()) offset = total;
    total += counts[size_t(r)];
  }
  const size_t mine = counts[size_t(host().rank())];
  auto full = data(total, 21);
  // Out of place.
  {
    float* ds = f.upload(full);
    float* dr = f.memory->alloc<float>(mine);
    std::vector<float> hs = full, hr(mine);
    ASSERT_TRUE(host().reduce_scatter(hs.data(), hr.data(), counts).is_ok());
    ASSERT_TRUE(f.staged->reduce_scatter(ds, dr, counts).is_ok());
    EXPECT_EQ(download(dr, mine), hr);
    EXPECT_EQ(download(ds, total), full) << "an out-of-place send buffer is left as it was";
  }
  // In place (ZeRO's gradient shards).
  {
    float* d = f.upload(full);
    std::vector<float> h = full;
    ASSERT_TRUE(host().reduce_scatter(h.data(), h.data() + offset, counts).is_ok());
    ASSERT_TRUE(f.staged->reduce_scatter(d, d + offset, counts).is_ok());
    EXPECT_EQ(download(d + offset, mine),
              std::vector<float>(h.begin() + long(offset), h.begin() + long(offset + mine)));
  }
  // All-gather, in place and out of place.
  {
    auto piece = data(mine, 31);
    float* dp = f.upload(piece);
    float* dr = f.memory->alloc<float>(total);
    std::vector<float> hr(total);
    ASSERT_TRUE(host().allgather(piece.data(), hr.data(), counts).is_ok());
    ASSERT_TRUE(f.staged->allgather(dp, dr, counts).is_ok());
    EXPECT_EQ(download(dr, total), hr);
    std::vector<float> in_place = hr;
    std::fill(in_place.begin(), in_place.end(), 0.0f);
    std::copy(piece.begin(), piece.end(), in_place.begin() + long(offset));
    float* di = f.upload(in_place);
    ASSERT_TRUE(f.staged->iallgather(di + offset, di, counts).wait().is_ok());
    EXPECT_EQ(download(di, total), hr);
  }
}

TEST(StagedMpi, Bf16PiecesBroadcastAndBytes) {
  Fixture f;
  const int W = host().size(), R = host().rank();
  std::vector<size_t> counts(size_t(W), 5);
  counts[0] = 2;
  size_t total = 0;
  for (size_t c : counts) total += c;
  std::vector<bf16> send(total);
  for (size_t i = 0; i < total; ++i) send[i].bits = uint16_t(R * 1000 + int(i));
  const size_t recv_n = size_t(W) * counts[size_t(R)];
  std::vector<bf16> hr(recv_n);
  bf16* ds = f.upload(send);
  bf16* dr = f.memory->alloc<bf16>(recv_n);
  ASSERT_TRUE(host().ialltoall_pieces(send.data(), hr.data(), counts).wait().is_ok());
  ASSERT_TRUE(f.staged->ialltoall_pieces(ds, dr, counts).wait().is_ok());
  for (size_t i = 0; i < recv_n; ++i) ASSERT_EQ(dr[i].bits, hr[i].bits) << i;
  // In-place bf16 all-gather of pieces.
  std::vector<bf16> all(total);
  size_t off = 0;
  for (int r = 0; r < R; ++r) off += counts[size_t(r)];
  for (size_t i = 0; i < counts[size_t(R)]; ++i)
    all[off + i].bits = uint16_t(7000 + R * 10 + int(i));
  bf16* da = f.upload(all);
  ASSERT_TRUE(host().iallgather_pieces(all.data(), counts).wait().is_ok());
  ASSERT_TRUE(f.staged->iallgather_pieces(da, counts).wait().is_ok());
  for (size_t i = 0; i < total; ++i) ASSERT_EQ(da[i].bits, all[i].bits) << i;
  // Broadcast from the last rank and every rank's bytes.
  std::vector<char> b(300, char('a' + R));
  char* db = f.upload(b);
  ASSERT_TRUE(f.staged->broadcast(db, b.size(), W - 1).is_ok());
  EXPECT_EQ(db[299], char('a' + W - 1));
  std::vector<char> mine(8, char('0' + R));
  char* dm = f.upload(mine);
  char* dall = f.memory->alloc<char>(8 * size_t(W));
  ASSERT_TRUE(f.staged->allgather_bytes(dm, 8, dall).is_ok());
  for (int r = 0; r < W; ++r) EXPECT_EQ(dall[size_t(r) * 8 + 7], char('0' + r));
}

TEST(StagedMpi, PointToPointAndSplits) {
  Fixture f;
  const int W = host().size(), R = host().rank();
  const int next = (R + 1) % W, prev = (R + W - 1) % W;
  // A ring of sendrecv and of isend/irecv pairs on device buffers.
  std::vector<float> mine = data(257, 41);
  float* dm = f.upload(mine);
  float* dg = f.memory->alloc<float>(257);
  ASSERT_TRUE(
      f.staged->sendrecv(dm, 257 * sizeof(float), next, dg, 257 * sizeof(float), prev, 5).is_ok());
  Rng rng(41, uint64_t(prev));
  std::vector<float> from_prev(257);
  rng.fill_uniform(from_prev.data(), 257, -1.0f, 1.0f);
  EXPECT_EQ(download(dg, 257), from_prev);
  float* dr = f.memory->alloc<float>(257);
  Request rr = f.staged->irecv(dr, 257 * sizeof(float), prev, 9);
  Request rs = f.staged->isend(dm, 257 * sizeof(float), next, 9);
  ASSERT_TRUE(rs.wait().is_ok());
  ASSERT_TRUE(rr.wait().is_ok());
  EXPECT_EQ(download(dr, 257), from_prev);
  // A receive of the wrong size is the host Comm's error, on the staged path too.
  if (W >= 2) {
    if (R == 0) {
      ASSERT_TRUE(f.staged->send(dm, 16, 1, 3).is_ok());
    } else if (R == 1) {
      Status s = f.staged->recv(dr, 8, 0, 3);
      EXPECT_FALSE(s.is_ok());
    }
    ASSERT_TRUE(host().barrier().is_ok());
  }
  // Splits (even and odd ranks) stay staged and reduce within their group.
  auto sub = f.staged->split(R % 2, R);
  ASSERT_TRUE(sub.is_ok()) << sub.status().message();
  std::vector<float> one = {float(R)};
  float* d1 = f.upload(one);
  ASSERT_TRUE((*sub)->allreduce(d1, 1).is_ok());
  float expect = 0;
  for (int r = R % 2; r < W; r += 2) expect += float(r);
  EXPECT_EQ(d1[0], expect);
  EXPECT_EQ((*sub)->backend(), "mpi+staged");
}

TEST(StagedMpi, TheNcclBootstrapCarriesRankZerosIdOrItsError) {
  unsigned char id[128];
  std::memset(id, 0, sizeof(id));
  ASSERT_TRUE(detail::share_unique_id(host(), id, sizeof(id), [](void* p) {
                for (int i = 0; i < 128; ++i)
                  static_cast<unsigned char*>(p)[i] = uint8_t(i * 7 + 1);
                return Status::ok();
              }).is_ok());
  for (int i = 0; i < 128; ++i) ASSERT_EQ(id[i], uint8_t(i * 7 + 1)) << i;
  Status s = detail::share_unique_id(host(), id, sizeof(id),
                                     [](void*) { return Status::internal("rank 0: no NIC"); });
  ASSERT_FALSE(s.is_ok()) << "every rank fails, none waits";
  if (host().rank() == 0)
    EXPECT_EQ(s.message(), "rank 0: no NIC");
  else
    EXPECT_NE(s.message().find("rank 0 could not make the unique id"), std::string::npos)
        << s.message();
}

TEST(StagedMpi, RanksOnOneGpuTakeTheStagedPath) {
  // One GPU id for every rank: shared wherever two ranks are on one host
  // (this test also runs on two namespace hosts, one rank each).
  auto names = host_names(host());
  ASSERT_TRUE(names.is_ok());
  const std::set<std::string> hosts(names->begin(), names->end());
  auto shared = choose_device_path(host(), "0000:19:00.0");
  ASSERT_TRUE(shared.is_ok());
  EXPECT_EQ(*shared, hosts.size() < names->size() ? DevicePath::kStaged : DevicePath::kNccl);
  auto own = choose_device_path(host(), "0000:" + std::to_string(10 + host().rank()) + ":00.0");
  ASSERT_TRUE(own.is_ok());
  EXPECT_EQ(*own, DevicePath::kNccl);
}

}  // namespace
}  // namespace crucible::comm

namespace crucible::runtime {
namespace {

// Several ranks asking for GPUs where there are none: every rank gets the
// same one-line refusal, none waits (placement gathers every rank's count).
TEST(GpuWorldMpi, RanksOnAMachineWithoutGpusAreRefusedAlike) {
  comm::Comm& world = **comm::world();
  Config cfg;
  cfg.run.device = "cpu";
  auto cpu = open_gpu_world(world, cfg);
  ASSERT_TRUE(cpu.is_ok()) << cpu.status().message();
  EXPECT_TRUE(cpu->device.is_cpu());
  EXPECT_EQ(cpu->comm, nullptr);
  if (kernels::cuda::device_count() > 0) GTEST_SKIP() << "this machine has a GPU";
  cfg.run.device = "cuda";
  auto gpu = open_gpu_world(world, cfg);
  ASSERT_FALSE(gpu.is_ok());
  EXPECT_EQ(gpu.status().message().rfind("[launch] rank 0's host ", 0), 0u)
      << gpu.status().message();
  EXPECT_NE(gpu.status().message().find("has no GPU"), std::string::npos) << gpu.status().message();
}

}  // namespace
}  // namespace crucible::runtime
