// Tests of the MPI Comm, run by every rank of crucible_mpi_tests (2 and 4 ranks).
// Each rank's data comes from Rng(seed, rank), so every rank can compute what
// any collective must return without communicating.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "parallel/layout.h"
#include "core/rng.h"
#include "comm/comm.h"
#include "support/files.h"

namespace crucible::comm {
namespace {

Comm* comm() { return *world(); }
int rank() { return comm()->rank(); }
int size() { return comm()->size(); }

std::vector<float> rank_data(int r, size_t n, uint64_t seed) {
  std::vector<float> v(n);
  Rng rng(seed, static_cast<uint64_t>(r));
  if (n > 0) rng.fill_uniform(v.data(), n, -1.0f, 1.0f);
  return v;
}

uint64_t fnv1a(const void* data, size_t bytes) {
  uint64_t h = 1469598103934665603ull;
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

// Elementwise sum (in double), |sum|, max and min of every rank's rank_data.
struct Reference {
  std::vector<double> sum, abs_sum;
  std::vector<float> max, min;
  Reference(size_t n, uint64_t seed, size_t first = 0, size_t total = 0)
      : sum(n, 0.0), abs_sum(n, 0.0), max(n, -INFINITY), min(n, INFINITY) {
    for (int r = 0; r < size(); ++r) {
      std::vector<float> d = rank_data(r, total ? total : n, seed);
      for (size_t i = 0; i < n; ++i) {
        float x = d[first + i];
        sum[i] += x;
        abs_sum[i] += std::fabs(x);
        max[i] = std::max(max[i], x);
        min[i] = std::min(min[i], x);
      }
    }
  }
  // f32 sums of `size` terms in any order are within (size-1) roundings.
  void expect_sum(const float* got, size_t n, const char* what) const {
    size_t bad = 0;
    for (size_t i = 0; i < n; ++i)
      if (std::fabs(got[i] - sum[i]) > 4 * FLT_EPSILON * abs_sum[i] + 1e-30) {
        if (bad++ < 3) {
          ADD_FAILURE() << what << "[" << i << "] = " << got[i] << ", expected " << sum[i];
        }
      }
    EXPECT_EQ(bad, 0u) << what;
  }
};

// Lowers the MPI per-call limit for one test (every rank does the same).
class SmallCallLimit {
 public:
  explicit SmallCallLimit(size_t n) : old_(detail::set_max_count_per_call_for_testing(n)) {}
  ~SmallCallLimit() { detail::set_max_count_per_call_for_testing(old_); }

 private:
  size_t old_;
};

std::vector<size_t> uneven_counts(size_t base) {
  std::vector<size_t> counts(size());
  for (int r = 0; r < size(); ++r) counts[r] = r == 1 ? 0 : base + 37 * r;  // rank 1: none
  return counts;
}

size_t offset_of(const std::vector<size_t>& counts, int r) {
  size_t off = 0;
  for (int i = 0; i < r; ++i) off += counts[i];
  return off;
}

size_t total_of(const std::vector<size_t>& counts) { return offset_of(counts, size()); }

TEST(MpiComm, WorldIsMpiWithDistinctRanks) {
  EXPECT_TRUE(launched_by_mpi());
  EXPECT_EQ(comm()->backend(), "mpi");
  ASSERT_GE(size(), 2);
  if (const char* n = std::getenv("OMPI_COMM_WORLD_SIZE")) {
    EXPECT_EQ(size(), std::atoi(n));
  }
  auto again = world();
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ(*again, comm());
  int mine = rank();
  std::vector<int> all(size(), -1);
  ASSERT_TRUE(comm()->allgather_bytes(&mine, sizeof mine, all.data()).is_ok());
  for (int r = 0; r < size(); ++r) EXPECT_EQ(all[r], r);
}

TEST(MpiComm, AllreduceFloatSumMaxMinAllSizes) {
  for (size_t n : {size_t{0}, size_t{1}, size_t{1001}, size_t{3000017}}) {
    const uint64_t seed = 11 + n;
    Reference ref(n, seed);
    const std::vector<float> mine = rank_data(rank(), n, seed);

    std::vector<float> x = mine;
    ASSERT_TRUE(comm()->allreduce(x.data(), n, ReduceOp::kSum).is_ok()) << n;
    ref.expect_sum(x.data(), n, "sum");
    // Replicas must stay bit-identical: every rank gets the same bits.
    uint64_t h = fnv1a(x.data(), n * sizeof(float));
    std::vector<uint64_t> hashes(size());
    ASSERT_TRUE(comm()->allgather_bytes(&h, sizeof h, hashes.data()).is_ok());
    for (int r = 0; r < size(); ++r) EXPECT_EQ(hashes[r], h) << "rank " << r << " n " << n;

    x = mine;
    ASSERT_TRUE(comm()->allreduce(x.data(), n, ReduceOp::kMax).is_ok());
    EXPECT_TRUE(x == ref.max) << "max, n " << n;
    x = mine;
    ASSERT_TRUE(comm()->allreduce(x.data(), n, ReduceOp::kMin).is_ok());
    EXPECT_TRUE(x == ref.min) << "min, n " << n;
  }
}

TEST(MpiComm, ManyIallreducesInFlightWaitedInReverse) {
  const std::vector<size_t> sizes = {1, 1001, 65536, 1 << 20, 7};
  std::vector<std::vector<float>> bufs;
  std::vector<Request> reqs;
  for (size_t k = 0; k < sizes.size(); ++k) {
    bufs.push_back(rank_data(rank(), sizes[k], 100 + k));
    reqs.push_back(
        comm()->iallreduce(bufs[k].data(), sizes[k], k == 0 ? ReduceOp::kMax : ReduceOp::kSum));
  }
  for (Request& r : reqs) (void)r.test();  // drives progress; may or may not finish
  for (size_t k = sizes.size(); k-- > 0;) {
    ASSERT_TRUE(reqs[k].wait().is_ok()) << k;
    EXPECT_TRUE(reqs[k].done());
    EXPECT_TRUE(reqs[k].wait().is_ok()) << "wait is idempotent";
    EXPECT_TRUE(reqs[k].test());
  }
  for (size_t k = 0; k < sizes.size(); ++k) {
    Reference ref(sizes[k], 100 + k);
    if (k == 0)
      EXPECT_TRUE(bufs[k] == ref.max);
    else
      ref.expect_sum(bufs[k].data(), sizes[k], "iallreduce");
  }
}

TEST(MpiComm, IallreduceCompletesByPollingTest) {
  std::vector<float> x = rank_data(rank(), 4096, 7);
  Request req = comm()->iallreduce(x.data(), x.size());
  while (!req.test()) {
  }
  EXPECT_TRUE(req.done());
  EXPECT_TRUE(req.wait().is_ok());
  Reference(4096, 7).expect_sum(x.data(), x.size(), "polled iallreduce");
}

void check_reduce_scatter(const std::vector<size_t>& counts, uint64_t seed) {
  const size_t total = total_of(counts), off = offset_of(counts, rank()), n = counts[rank()];
  const std::vector<float> send = rank_data(rank(), total, seed);
  Reference ref(n, seed, off, total);

  std::vector<float> recv(n + 1, -7.0f);  // one guard element
  ASSERT_TRUE(comm()->reduce_scatter(send.data(), recv.data(), counts).is_ok());
  ref.expect_sum(recv.data(), n, "reduce_scatter");
  EXPECT_EQ(recv[n], -7.0f) << "wrote past this rank's piece";

  std::fill(recv.begin(), recv.end(), -7.0f);
  Request req = comm()->ireduce_scatter(send.data(), recv.data(), counts);
  (void)req.test();
  ASSERT_TRUE(req.wait().is_ok());
  ref.expect_sum(recv.data(), n, "ireduce_scatter");
  EXPECT_EQ(recv[n], -7.0f);

  std::vector<float> buf = send;  // in place: this rank's piece of buf
  ASSERT_TRUE(comm()->reduce_scatter(buf.data(), buf.data() + off, counts).is_ok());
  ref.expect_sum(buf.data() + off, n, "reduce_scatter in place");

  buf = send;
  req = comm()->ireduce_scatter(buf.data(), buf.data() + off, counts);
  ASSERT_TRUE(req.wait().is_ok());
  ref.expect_sum(buf.data() + off, n, "ireduce_scatter in place");
}

TEST(MpiComm, ReduceScatterUnevenCountsWithAnEmptyRank) {
  check_reduce_scatter(uneven_counts(1000), 21);
  check_reduce_scatter(uneven_counts(1), 22);
  std::vector<size_t> all_nonzero(size());
  for (int r = 0; r < size(); ++r) all_nonzero[r] = 500 + 3 * r;  // every rank has an offset
  check_reduce_scatter(all_nonzero, 24);
  std::vector<size_t> big(size(), 0);
  big[0] = 1 << 20;  // everything on rank 0
  check_reduce_scatter(big, 23);
}

void check_allgather(const std::vector<size_t>& counts, uint64_t seed) {
  const size_t total = total_of(counts), off = offset_of(counts, rank()), n = counts[rank()];
  std::vector<float> expected;
  for (int r = 0; r < size(); ++r) {
    std::vector<float> piece = rank_data(r, counts[r], seed);
    expected.insert(expected.end(), piece.begin(), piece.end());
  }
  const std::vector<float> mine = rank_data(rank(), n, seed);

  std::vector<float> recv(total, NAN);
  ASSERT_TRUE(comm()->allgather(mine.data(), recv.data(), counts).is_ok());
  EXPECT_TRUE(recv == expected) << "allgather";

  std::fill(recv.begin(), recv.end(), NAN);
  Request req = comm()->iallgather(mine.data(), recv.data(), counts);
  (void)req.test();
  ASSERT_TRUE(req.wait().is_ok());
  EXPECT_TRUE(recv == expected) << "iallgather";

  std::fill(recv.begin(), recv.end(), NAN);
  std::copy(mine.begin(), mine.end(), recv.begin() + off);
  ASSERT_TRUE(comm()->allgather(recv.data() + off, recv.data(), counts).is_ok());
  EXPECT_TRUE(recv == expected) << "allgather in place";

  std::fill(recv.begin(), recv.end(), NAN);
  std::copy(mine.begin(), mine.end(), recv.begin() + off);
  req = comm()->iallgather(recv.data() + off, recv.data(), counts);
  ASSERT_TRUE(req.wait().is_ok());
  EXPECT_TRUE(recv == expected) << "iallgather in place";
}

TEST(MpiComm, AllgatherUnevenCountsWithAnEmptyRank) {
  check_allgather(uneven_counts(1000), 31);
  check_allgather(uneven_counts(0), 32);  // rank 0 empty too
  std::vector<size_t> all_nonzero(size());
  for (int r = 0; r < size(); ++r) all_nonzero[r] = 500 + 3 * r;
  check_allgather(all_nonzero, 33);
}

TEST(MpiComm, BroadcastFromRootOne) {
  std::vector<float> x = rank_data(rank(), 100003, 41);
  ASSERT_TRUE(comm()->broadcast(x.data(), x.size() * sizeof(float), 1).is_ok());
  EXPECT_TRUE(x == rank_data(1, 100003, 41));
  EXPECT_TRUE(comm()->broadcast(nullptr, 0, 1).is_ok());
  Status bad = comm()->broadcast(x.data(), 4, size());
  EXPECT_EQ(bad.code(), Code::kInvalidArgument);
  EXPECT_NE(bad.message().find("[dist] broadcast"), std::string::npos) << bad.message();
}

TEST(MpiComm, AllgatherBytesInRankOrder) {
  struct Info {
    int rank;
    char name[12];
  };
  Info mine{rank(), {}};
  std::snprintf(mine.name, sizeof mine.name, "rank-%d", rank());
  std::vector<Info> all(size());
  ASSERT_TRUE(comm()->allgather_bytes(&mine, sizeof mine, all.data()).is_ok());
  for (int r = 0; r < size(); ++r) {
    EXPECT_EQ(all[r].rank, r);
    EXPECT_EQ(std::string(all[r].name), "rank-" + std::to_string(r));
  }
  std::vector<Info> inplace(size(), Info{-1, {}});
  inplace[rank()] = mine;
  ASSERT_TRUE(comm()->allgather_bytes(&inplace[rank()], sizeof mine, inplace.data()).is_ok());
  for (int r = 0; r < size(); ++r) EXPECT_EQ(inplace[r].rank, r);
}

// Ring: rank r sends to r+1 and receives from r-1; sizes differ per rank.
// Non-blocking point to point: every rank posts its receive from the previous
// rank and its send to the next, large and chunked (a small per-call limit),
// and only then waits: no order of arrival can block.
TEST(MpiComm, IsendIrecvRingInEveryOrder) {
  const int next = (rank() + 1) % size(), prev = (rank() + size() - 1) % size();
  const size_t old = detail::set_max_count_per_call_for_testing(100000);
  for (int round = 0; round < 3; ++round) {
    const size_t n = 262144 + 7 * size_t(round);
    const std::vector<float> out = rank_data(rank(), n, 80 + round);
    std::vector<float> in(n);
    Request r = comm()->irecv(in.data(), n * sizeof(float), prev, 9);
    Request s = comm()->isend(out.data(), n * sizeof(float), next, 9);
    if (round == 1) {  // wait in the other order
      ASSERT_TRUE(s.wait().is_ok());
      ASSERT_TRUE(r.wait().is_ok());
    } else if (round == 2) {  // or poll both to completion
      while (!(r.test() && s.test())) {
      }
      ASSERT_TRUE(r.wait().is_ok());
      ASSERT_TRUE(s.wait().is_ok());
    } else {
      ASSERT_TRUE(r.wait().is_ok());
      ASSERT_TRUE(s.wait().is_ok());
    }
    EXPECT_TRUE(in == rank_data(prev, n, 80 + round)) << "round " << round;
  }
  detail::set_max_count_per_call_for_testing(old);
  // A receive that names another size than was sent is an error, not a hang.
  float one = 1, two[2] = {0, 0};
  Request s = comm()->isend(&one, sizeof one, next, 10);
  Status got = comm()->irecv(two, sizeof two, prev, 10).wait();
  ASSERT_TRUE(s.wait().is_ok());
  ASSERT_FALSE(got.is_ok());
  EXPECT_NE(got.message().find("expected 8 bytes from rank " + std::to_string(prev) + ", got 4"),
            std::string::npos)
      << got.message();
  EXPECT_FALSE(comm()->isend(&one, sizeof one, size(), 1).wait().is_ok());  // no such rank
}

// Sub-communicators: pairs of neighbours (a tensor-parallel group of 2) and
// the strided groups across them; each reduces over its own members only.
TEST(MpiComm, SplitMakesIndependentGroups) {
  if (size() % 2 != 0) GTEST_SKIP() << "needs an even world";
  auto pairs = comm()->split(rank() / 2, rank());
  ASSERT_TRUE(pairs) << pairs.status().message();
  auto strided = comm()->split(rank() % 2, rank());
  ASSERT_TRUE(strided) << strided.status().message();
  EXPECT_EQ((*pairs)->size(), 2);
  EXPECT_EQ((*pairs)->rank(), rank() % 2);
  EXPECT_EQ((*strided)->size(), size() / 2);
  EXPECT_EQ((*strided)->rank(), rank() / 2);
  double v = rank();
  ASSERT_TRUE((*pairs)->allreduce(&v, 1, ReduceOp::kSum).is_ok());
  EXPECT_EQ(v, double(rank() / 2 * 2) * 2 + 1);  // 2k + (2k + 1)
  double w = rank();
  ASSERT_TRUE((*strided)->allreduce(&w, 1, ReduceOp::kSum).is_ok());
  double want = 0;
  for (int r = rank() % 2; r < size(); r += 2) want += r;
  EXPECT_EQ(w, want);
  // Point to point inside a group uses the group's ranks.
  const int peer = 1 - (*pairs)->rank();
  int mine = rank(), theirs = -1;
  ASSERT_TRUE((*pairs)->sendrecv(&mine, sizeof mine, peer, &theirs, sizeof theirs, peer, 3).is_ok());
  EXPECT_EQ(theirs, rank() ^ 1);
  EXPECT_FALSE(comm()->split(-1, 0).is_ok());
}

// The layout's groups as sub-communicators: each reduces over exactly the
// world ranks the layout lists for it.
TEST(MpiComm, LayoutGroupsReduceOverTheirMembers) {
  if (size() != 4) GTEST_SKIP() << "a 4-rank grid";
  nn::GPTConfig m;
  for (parallel::LayoutSpec spec : {parallel::LayoutSpec{2, 1, 1, "1f1b"}, parallel::LayoutSpec{2, 2, 1, "1f1b"},
                                    parallel::LayoutSpec{1, 2, 1, "1f1b"}, parallel::LayoutSpec{4, 1, 1, "1f1b"}}) {
    auto layout = parallel::Layout::make(spec, size(), m, 4);
    ASSERT_TRUE(layout) << layout.status().message();
    auto groups = parallel::make_groups(*comm(), *layout);
    ASSERT_TRUE(groups) << groups.status().message();
    struct G {
      comm::Comm* comm;
      std::vector<int> members;
    };
    for (const G& g : {G{groups->tp.get(), layout->tp_group(rank())}, G{groups->pp.get(), layout->pp_group(rank())},
                       G{groups->dp.get(), layout->dp_group(rank())}}) {
      ASSERT_EQ(g.comm->size(), int(g.members.size())) << layout->describe();
      EXPECT_EQ(g.members[size_t(g.comm->rank())], rank()) << layout->describe();
      double v = double(1 << rank()), want = 0;
      for (int r : g.members) want += double(1 << r);
      ASSERT_TRUE(g.comm->allreduce(&v, 1, ReduceOp::kSum).is_ok());
      EXPECT_EQ(v, want) << layout->describe();
    }
  }
}

TEST(MpiComm, SendRecvAndSendrecvRing) {
  const int next = (rank() + 1) % size(), prev = (rank() + size() - 1) % size();
  auto len = [](int r) { return size_t{262144} + 13 * r; };  // 1 MiB: beyond eager sends
  for (int round = 0; round < 2; ++round) {
    const std::vector<float> out = rank_data(rank(), len(rank()), 50 + round);
    std::vector<float> in(len(prev));
    const size_t out_bytes = out.size() * sizeof(float), in_bytes = in.size() * sizeof(float);
    if (round == 0) {
      // Even ranks send first, odd ranks receive first: no cycle of blocked sends.
      if (rank() % 2 == 0) {
        ASSERT_TRUE(comm()->send(out.data(), out_bytes, next, 5).is_ok());
        ASSERT_TRUE(comm()->recv(in.data(), in_bytes, prev, 5).is_ok());
      } else {
        ASSERT_TRUE(comm()->recv(in.data(), in_bytes, prev, 5).is_ok());
        ASSERT_TRUE(comm()->send(out.data(), out_bytes, next, 5).is_ok());
      }
    } else {
      ASSERT_TRUE(
          comm()->sendrecv(out.data(), out_bytes, next, in.data(), in_bytes, prev, 6).is_ok());
    }
    EXPECT_TRUE(in == rank_data(prev, len(prev), 50 + round)) << "round " << round;
  }
  // Zero-byte messages still pair up.
  ASSERT_TRUE(comm()->sendrecv(nullptr, 0, next, nullptr, 0, prev, 7).is_ok());
}

TEST(MpiComm, RecvOfTheWrongSizeIsAnError) {
  char buf[16] = "0123456789abcde";
  if (rank() == 0) {
    ASSERT_TRUE(comm()->send(buf, 4, 1, 90).is_ok());
    ASSERT_TRUE(comm()->send(buf, 16, 1, 91).is_ok());
  } else if (rank() == 1) {
    char got[16];
    Status shorter = comm()->recv(got, 8, 0, 90);
    EXPECT_EQ(shorter.code(), Code::kInvalidArgument);
    EXPECT_NE(shorter.message().find("expected 8 bytes from rank 0, got 4"), std::string::npos)
        << shorter.message();
    Status longer = comm()->recv(got, 8, 0, 91);
    EXPECT_FALSE(longer.is_ok());
    EXPECT_NE(longer.message().find("[dist] irecv: MPI_Wait failed (src/comm/comm_mpi.cc:"),
              std::string::npos)
        << longer.message();
    EXPECT_NE(longer.message().find("TRUNCATE"), std::string::npos) << longer.message();
  }
  ASSERT_TRUE(comm()->barrier().is_ok());
}

// Every rank writes its file before the barrier; after it, all files exist.
TEST(MpiComm, BarrierOrdersFileWrites) {
  std::unique_ptr<testutil::TempDir> dir;
  char path[512] = {};
  if (rank() == 0) {
    dir = std::make_unique<testutil::TempDir>("mpi_barrier");
    std::snprintf(path, sizeof path, "%s", dir->path().c_str());
  }
  ASSERT_TRUE(comm()->broadcast(path, sizeof path, 0).is_ok());
  const std::string base(path);
  { std::ofstream(base + "/rank_" + std::to_string(rank())) << rank(); }
  ASSERT_TRUE(comm()->barrier().is_ok());
  for (int r = 0; r < size(); ++r)
    EXPECT_TRUE(std::filesystem::exists(base + "/rank_" + std::to_string(r))) << r;
  ASSERT_TRUE(comm()->barrier().is_ok());  // nobody looks any more: rank 0 may remove it
}

TEST(MpiComm, AllreduceDouble) {
  std::vector<double> x = {rank() + 0.5, -1.0 * rank(), 1e300};
  ASSERT_TRUE(comm()->allreduce(x.data(), 2, ReduceOp::kSum).is_ok());
  const double n = size();
  EXPECT_EQ(x[0], n * (n - 1) / 2 + 0.5 * n);
  EXPECT_EQ(x[1], -n * (n - 1) / 2);
  EXPECT_EQ(x[2], 1e300) << "n = 2 leaves the third element alone";
  double m[2] = {static_cast<double>(rank()), static_cast<double>(rank())};
  ASSERT_TRUE(comm()->allreduce(&m[0], 1, ReduceOp::kMax).is_ok());
  ASSERT_TRUE(comm()->allreduce(&m[1], 1, ReduceOp::kMin).is_ok());
  EXPECT_EQ(m[0], n - 1);
  EXPECT_EQ(m[1], 0.0);
}

// Blocking calls split buffers beyond the per-call limit into several MPI
// calls; non-blocking reduce_scatter/allgather refuse them.
TEST(MpiComm, BuffersBeyondThePerCallLimit) {
  SmallCallLimit limit(1000);
  ASSERT_EQ(max_count_per_call(), 1000u);

  std::vector<float> x = rank_data(rank(), 3001, 61);
  ASSERT_TRUE(comm()->allreduce(x.data(), x.size()).is_ok());
  Reference(3001, 61).expect_sum(x.data(), x.size(), "chunked allreduce");
  x = rank_data(rank(), 3001, 61);
  Request req = comm()->iallreduce(x.data(), x.size());
  ASSERT_TRUE(req.wait().is_ok());
  Reference(3001, 61).expect_sum(x.data(), x.size(), "chunked iallreduce");

  std::vector<size_t> counts = uneven_counts(1200);  // each piece and the total > 1000
  const size_t total = total_of(counts), off = offset_of(counts, rank()), n = counts[rank()];
  {
    const std::vector<float> send = rank_data(rank(), total, 62);
    Reference ref(n, 62, off, total);
    std::vector<float> recv(n);
    ASSERT_TRUE(comm()->reduce_scatter(send.data(), recv.data(), counts).is_ok());
    ref.expect_sum(recv.data(), n, "chunked reduce_scatter");
    std::vector<float> buf = send;
    ASSERT_TRUE(comm()->reduce_scatter(buf.data(), buf.data() + off, counts).is_ok());
    ref.expect_sum(buf.data() + off, n, "chunked reduce_scatter in place");
    Status s = comm()->ireduce_scatter(send.data(), recv.data(), counts).wait();
    EXPECT_EQ(s.code(), Code::kInvalidArgument);
    EXPECT_NE(s.message().find("use the blocking reduce_scatter"), std::string::npos);
  }
  {
    std::vector<float> expected;
    for (int r = 0; r < size(); ++r) {
      std::vector<float> p = rank_data(r, counts[r], 63);
      expected.insert(expected.end(), p.begin(), p.end());
    }
    const std::vector<float> mine = rank_data(rank(), n, 63);
    std::vector<float> recv(total, NAN);
    ASSERT_TRUE(comm()->allgather(mine.data(), recv.data(), counts).is_ok());
    EXPECT_TRUE(recv == expected) << "chunked allgather";
    std::fill(recv.begin(), recv.end(), NAN);
    std::copy(mine.begin(), mine.end(), recv.begin() + off);
    ASSERT_TRUE(comm()->allgather(recv.data() + off, recv.data(), counts).is_ok());
    EXPECT_TRUE(recv == expected) << "chunked allgather in place";
    Status s = comm()->iallgather(mine.data(), recv.data(), counts).wait();
    EXPECT_EQ(s.code(), Code::kInvalidArgument);
  }
  {
    std::vector<float> b = rank_data(rank(), 2501, 64);  // 10004 bytes
    ASSERT_TRUE(comm()->broadcast(b.data(), b.size() * sizeof(float), 0).is_ok());
    EXPECT_TRUE(b == rank_data(0, 2501, 64));
    const int next = (rank() + 1) % size(), prev = (rank() + size() - 1) % size();
    const std::vector<float> out = rank_data(rank(), 2501, 65);
    std::vector<float> in(2501);
    ASSERT_TRUE(comm()->sendrecv(out.data(), 10004, next, in.data(), 10004, prev, 8).is_ok());
    EXPECT_TRUE(in == rank_data(prev, 2501, 65)) << "chunked sendrecv";
    std::fill(in.begin(), in.end(), 0.0f);
    if (rank() % 2 == 0) {
      ASSERT_TRUE(comm()->send(out.data(), 10004, next, 9).is_ok());
      ASSERT_TRUE(comm()->recv(in.data(), 10004, prev, 9).is_ok());
    } else {
      ASSERT_TRUE(comm()->recv(in.data(), 10004, prev, 9).is_ok());
      ASSERT_TRUE(comm()->send(out.data(), 10004, next, 9).is_ok());
    }
    EXPECT_TRUE(in == rank_data(prev, 2501, 65)) << "chunked send/recv";
    std::vector<char> big(1000 / size() + 1), all(big.size() * size());
    EXPECT_EQ(comm()->allgather_bytes(big.data(), big.size(), all.data()).code(),
              Code::kInvalidArgument);
  }
}

// Checks every rank makes alike, before any communication.
TEST(MpiComm, ArgumentErrorsAreReportedWithoutCommunicating) {
  std::vector<float> x(8);
  std::vector<size_t> wrong(size() + 1, 1);
  Status s = comm()->reduce_scatter(x.data(), x.data(), wrong);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("[dist] reduce_scatter: " + std::to_string(size() + 1) + " counts"),
            std::string::npos)
      << s.message();
  EXPECT_EQ(comm()->iallgather(x.data(), x.data(), wrong).wait().code(), Code::kInvalidArgument);
  EXPECT_EQ(comm()->allreduce(static_cast<float*>(nullptr), 3).code(), Code::kInvalidArgument);
  EXPECT_EQ(comm()->send(x.data(), 4, size(), 0).code(), Code::kInvalidArgument);
  EXPECT_EQ(comm()->recv(x.data(), 4, -1, 0).code(), Code::kInvalidArgument);
  EXPECT_EQ(comm()->send(x.data(), 4, 0, -3).code(), Code::kInvalidArgument);
  std::vector<size_t> counts(size(), 2);  // overlapping, but not in place
  std::vector<float> full(2 * size());
  EXPECT_EQ(comm()->allgather(full.data() + 1, full.data(), counts).code(), Code::kInvalidArgument);
  ASSERT_TRUE(comm()->barrier().is_ok());
}

}  // namespace
}  // namespace crucible::comm
