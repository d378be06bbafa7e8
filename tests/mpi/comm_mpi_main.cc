// main() of crucible_mpi_tests, run by ctest under mpirun on 2 and 4 ranks.
//
// Every rank runs every test (the calls are collective). Rank 0 prints
// GoogleTest's usual output; other ranks print only their failures, prefixed
// with the rank. The exit code is non-zero on every rank when any rank failed.
//
// --crucible-abort-test: rank 1 calls Comm::abort(7) while the other ranks
// wait in a barrier (the job must end; ctest checks mpirun's report).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "comm/comm.h"

namespace {

using crucible::comm::Comm;

// Prints failed assertions of a non-zero rank, nothing else.
class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  // The name is kept here: UnitTest::current_test_info() would take the lock
  // that GoogleTest holds while it calls OnTestPartResult.
  void OnTestStart(const ::testing::TestInfo& info) override {
    test_ = std::string(info.test_suite_name()) + "." + info.name();
  }
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (!r.failed()) return;
    std::fprintf(stderr, "[rank %d] %s: %s:%d: %s\n", rank_, test_.c_str(),
                 r.file_name() ? r.file_name() : "?", r.line_number(), r.summary());
  }

 private:
  int rank_;
  std::string test_;
};

int abort_test(Comm* comm) {
  if (comm->size() < 2) return 1;
  if (comm->rank() == 1) comm->abort(7);
  // Never returns: rank 1's abort ends this rank too.
  (void)comm->barrier();
  std::fprintf(stderr, "rank %d passed a barrier that rank 1 never entered\n", comm->rank());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  auto world = crucible::comm::world();
  if (!world) {
    std::fprintf(stderr, "%s\n", world.status().message().c_str());
    return 2;
  }
  Comm* comm = *world;
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--crucible-abort-test") == 0) return abort_test(comm);

  ::testing::InitGoogleTest(&argc, argv);
  if (comm->rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(comm->rank()));
  }
  int local = RUN_ALL_TESTS();
  double failed = local != 0 ? 1.0 : 0.0;
  crucible::Status s = comm->allreduce(&failed, 1, crucible::comm::ReduceOp::kSum);
  if (!s.is_ok()) {
    std::fprintf(stderr, "%s\n", s.message().c_str());
    return 1;
  }
  if (comm->rank() == 0 && failed > 0)
    std::fprintf(stderr, "%d of %d ranks had failures\n", static_cast<int>(failed), comm->size());
  return failed > 0 ? 1 : 0;
}
