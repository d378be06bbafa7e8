// The single-process Comm, Request's semantics and launched_by_mpi(), in a
// plain (not MPI-launched) process. The MPI backend: tests/mpi/comm_mpi_*.cc.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "comm/comm.h"

namespace crucible::comm {
namespace {

TEST(SingleComm, IsRankZeroOfOne) {
  auto comm = make_single_comm();
  EXPECT_EQ(comm->rank(), 0);
  EXPECT_EQ(comm->size(), 1);
  EXPECT_EQ(comm->backend(), "single");
}

TEST(SingleComm, ReductionsLeaveDataUnchanged) {
  auto comm = make_single_comm();
  std::vector<float> x = {1.5f, -2.0f, 3.25f};
  const std::vector<float> orig = x;
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin}) {
    ASSERT_TRUE(comm->allreduce(x.data(), x.size(), op).is_ok());
    EXPECT_EQ(x, orig);
    Request r = comm->iallreduce(x.data(), x.size(), op);
    EXPECT_TRUE(r.done());
    EXPECT_TRUE(r.wait().is_ok());
    EXPECT_EQ(x, orig);
  }
  double d[2] = {0.5, -4.0};
  ASSERT_TRUE(comm->allreduce(d, 2, ReduceOp::kSum).is_ok());
  EXPECT_EQ(d[0], 0.5);
  EXPECT_EQ(d[1], -4.0);
  EXPECT_EQ(comm->allreduce(static_cast<float*>(nullptr), 2).code(), Code::kInvalidArgument);
  EXPECT_TRUE(comm->allreduce(static_cast<float*>(nullptr), 0).is_ok());
}

TEST(SingleComm, ReduceScatterAndAllgatherCopy) {
  auto comm = make_single_comm();
  const std::vector<float> src = {1, 2, 3, 4, 5};
  std::vector<float> out(5, NAN);
  ASSERT_TRUE(comm->reduce_scatter(src.data(), out.data(), {5}).is_ok());
  EXPECT_EQ(out, src);
  out.assign(5, NAN);
  ASSERT_TRUE(comm->ireduce_scatter(src.data(), out.data(), {5}).wait().is_ok());
  EXPECT_EQ(out, src);
  out.assign(5, NAN);
  ASSERT_TRUE(comm->allgather(src.data(), out.data(), {5}).is_ok());
  EXPECT_EQ(out, src);
  out.assign(5, NAN);
  ASSERT_TRUE(comm->iallgather(src.data(), out.data(), {5}).wait().is_ok());
  EXPECT_EQ(out, src);
  // In place: the piece is the whole buffer.
  std::vector<float> buf = src;
  ASSERT_TRUE(comm->reduce_scatter(buf.data(), buf.data(), {5}).is_ok());
  ASSERT_TRUE(comm->allgather(buf.data(), buf.data(), {5}).is_ok());
  EXPECT_EQ(buf, src);
  // Zero elements: nothing to do, null buffers are fine.
  EXPECT_TRUE(comm->allgather(nullptr, nullptr, {0}).is_ok());
}

TEST(SingleComm, ArgumentErrorsNameTheOperation) {
  auto comm = make_single_comm();
  std::vector<float> a(4), b(4);
  Status s = comm->reduce_scatter(a.data(), b.data(), {2, 2});
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_EQ(s.message(), "[dist] reduce_scatter: 2 counts for a world of 1 ranks");
  s = comm->allgather(a.data() + 1, a.data(), {3});  // overlapping, not in place
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("overlap"), std::string::npos) << s.message();
  EXPECT_EQ(comm->reduce_scatter(nullptr, b.data(), {4}).code(), Code::kInvalidArgument);
  s = comm->broadcast(a.data(), 16, 1);
  EXPECT_EQ(s.message(), "[dist] broadcast: root 1 is not a rank of a world of 1");
  EXPECT_TRUE(comm->broadcast(a.data(), 16, 0).is_ok());
}

TEST(SingleComm, PointToPoint) {
  auto comm = make_single_comm();
  const char msg[] = "hello";
  char got[6] = {};
  Status s = comm->send(msg, sizeof msg, 0, 1);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("use sendrecv"), std::string::npos) << s.message();
  EXPECT_EQ(comm->recv(got, sizeof got, 0, 1).code(), Code::kInvalidArgument);
  EXPECT_EQ(comm->send(msg, sizeof msg, 1, 1).message(),
            "[dist] send: dest 1 is not a rank of a world of 1");
  ASSERT_TRUE(comm->sendrecv(msg, sizeof msg, 0, got, sizeof got, 0, 3).is_ok());
  EXPECT_STREQ(got, "hello");
  EXPECT_EQ(comm->sendrecv(msg, 6, 0, got, 4, 0, 3).code(), Code::kInvalidArgument);
}

TEST(SingleComm, AllgatherBytesAndBarrier) {
  auto comm = make_single_comm();
  const int v = 42;
  int out = 0;
  ASSERT_TRUE(comm->allgather_bytes(&v, sizeof v, &out).is_ok());
  EXPECT_EQ(out, 42);
  EXPECT_TRUE(comm->barrier().is_ok());
}

TEST(SingleCommDeathTest, AbortExitsWithTheCode) {
  auto comm = make_single_comm();
  EXPECT_EXIT(comm->abort(3), ::testing::ExitedWithCode(3), "");
}

// A backend request that finishes after a number of test() calls.
class CountdownImpl : public Request::Impl {
 public:
  CountdownImpl(int polls, Status outcome, int* waits)
      : polls_(polls), outcome_(outcome), waits_(waits) {}
  bool test(Status* s) override {
    if (--polls_ > 0) return false;
    *s = outcome_;
    return true;
  }
  Status wait() override {
    ++*waits_;
    return outcome_;
  }

 private:
  int polls_;
  Status outcome_;
  int* waits_;
};

TEST(Request, DefaultIsFinishedAndOk) {
  Request r;
  EXPECT_TRUE(r.done());
  EXPECT_TRUE(r.test());
  EXPECT_TRUE(r.wait().is_ok());
  Request failed = Request::finished(Status::invalid("[dist] x"));
  EXPECT_TRUE(failed.done());
  EXPECT_EQ(failed.wait().message(), "[dist] x");
}

TEST(Request, TestPollsUntilFinishedAndKeepsTheOutcome) {
  int waits = 0;
  Request r(std::make_unique<CountdownImpl>(3, Status::io("[dist] boom"), &waits));
  EXPECT_FALSE(r.done());
  EXPECT_FALSE(r.test());
  EXPECT_FALSE(r.test());
  EXPECT_TRUE(r.test());
  EXPECT_TRUE(r.done());
  EXPECT_EQ(r.wait().message(), "[dist] boom");
  EXPECT_EQ(r.wait().message(), "[dist] boom") << "wait is idempotent";
  EXPECT_EQ(waits, 0) << "finished by test(): the backend is not waited on again";
}

TEST(Request, DestroyingOrReplacingAnUnfinishedRequestWaits) {
  int waits = 0;
  {
    Request r(std::make_unique<CountdownImpl>(100, Status::ok(), &waits));
    Request moved = std::move(r);
    EXPECT_TRUE(r.done()) << "a moved-from request owns nothing";
    EXPECT_FALSE(moved.done());
    moved = Request(std::make_unique<CountdownImpl>(100, Status::ok(), &waits));
    EXPECT_EQ(waits, 1) << "the replaced request was waited for";
  }
  EXPECT_EQ(waits, 2) << "the destroyed request was waited for";
}

// Sets environment variables for one test and restores them afterwards.
class ScopedEnv {
 public:
  ScopedEnv() {
    for (const char* name : kNames) {
      const char* v = getenv(name);
      if (v) saved_[name] = v;
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    for (const char* name : kNames) {
      auto it = saved_.find(name);
      if (it != saved_.end())
        setenv(name, it->second.c_str(), 1);
      else
        unsetenv(name);
    }
  }
  static constexpr const char* kNames[] = {
      "OMPI_COMM_WORLD_SIZE", "PMIX_RANK",    "PMI_RANK",
      "SLURM_PROCID",         "SLURM_NTASKS", "SLURM_STEP_NUM_TASKS"};

 private:
  std::map<std::string, std::string> saved_;
};

TEST(LaunchedByMpi, FalseInAPlainProcessTrueUnderLaunchers) {
  ScopedEnv env;
  EXPECT_FALSE(launched_by_mpi());
  setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
  EXPECT_TRUE(launched_by_mpi());
  unsetenv("OMPI_COMM_WORLD_SIZE");
  setenv("PMIX_RANK", "0", 1);
  EXPECT_TRUE(launched_by_mpi());
  unsetenv("PMIX_RANK");
  // A Slurm batch script's own process (one task) is not an MPI launch.
  setenv("SLURM_PROCID", "0", 1);
  setenv("SLURM_NTASKS", "1", 1);
  EXPECT_FALSE(launched_by_mpi());
  setenv("SLURM_NTASKS", "4", 1);
  EXPECT_TRUE(launched_by_mpi());
  setenv("SLURM_STEP_NUM_TASKS", "1", 1);  // the step's task count wins
  EXPECT_FALSE(launched_by_mpi());
}

TEST(World, IsSingleInAPlainProcess) {
  // ctest runs this binary without mpirun: unless someone launched it under
  // one, world() is the single-process Comm and never initialises MPI.
  if (launched_by_mpi()) GTEST_SKIP() << "running under an MPI launcher";
  auto w = world();
  ASSERT_TRUE(w.is_ok()) << w.status().message();
  EXPECT_EQ((*w)->backend(), "single");
  EXPECT_EQ((*w)->size(), 1);
  auto again = world();
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ(*again, *w);
}

}  // namespace
}  // namespace crucible::comm
