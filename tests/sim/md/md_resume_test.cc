// The md workload resumed from a checkpoint at step k gives the bits of the
// uninterrupted run, in both modes, trajectory included; the reproducible
// mode gives the same bits with 1 and 2 OpenMP threads.
#include <gtest/gtest.h>
#include <omp.h>

#include "md_helpers.h"
#include "support/files.h"

namespace crucible::sim {
namespace {

using mdtest::make;
using mdtest::run_to;
using mdtest::same_state;

void check_resume(MdConfig c, int64_t k) {
  testutil::TempDir d1("md_resume_a"), d2("md_resume_b");
  auto comm = comm::make_single_comm();
  auto whole = make(c, *comm);
  ASSERT_TRUE(whole->begin(d1.path()).is_ok());
  ASSERT_TRUE(run_to(*whole, c.steps).is_ok());
  auto final_whole = whole->save();
  ASSERT_TRUE(final_whole.is_ok());
  auto summary_whole = whole->finish(d1.path());
  ASSERT_TRUE(summary_whole.is_ok());

  auto first = make(c, *comm);
  ASSERT_TRUE(first->begin(d2.path()).is_ok());
  ASSERT_TRUE(run_to(*first, k).is_ok());
  auto at_k = first->save();
  ASSERT_TRUE(at_k.is_ok());
  // The first process keeps writing past k (then dies): the resumed run must
  // cut the trajectory back.
  ASSERT_TRUE(run_to(*first, k + 7).is_ok());
  first.reset();

  auto second = make(c, *comm);
  ASSERT_TRUE(second->load(*at_k, k).is_ok());
  ASSERT_TRUE(second->begin(d2.path()).is_ok());
  ASSERT_TRUE(run_to(*second, c.steps).is_ok());
  auto final_resumed = second->save();
  ASSERT_TRUE(final_resumed.is_ok());
  EXPECT_TRUE(same_state(*final_whole, *final_resumed));
  EXPECT_EQ(final_whole->scalars.dump(), final_resumed->scalars.dump());
  auto summary_resumed = second->finish(d2.path());
  ASSERT_TRUE(summary_resumed.is_ok());
  EXPECT_EQ(summary_whole->dump(), summary_resumed->dump());
  if (c.dump_every > 0) {
    const std::string a = testutil::read_file(d1 / "md_traj.xyz"),
                      b = testutil::read_file(d2 / "md_traj.xyz");
    EXPECT_FALSE(a.empty());
    EXPECT_TRUE(a == b) << "trajectories differ: " << a.size() << " vs " << b.size() << " bytes";
  }
}

TEST(MdResume, FastModeBitIdentical) {
  MdConfig c = mdtest::small_config();
  c.dump_every = 20;
  check_resume(c, 73);  // mid-way between list builds, during NVE
}

TEST(MdResume, FastModeDuringThermostatBitIdentical) {
  MdConfig c = mdtest::small_config();
  c.neighbor_every = 10;
  check_resume(c, 31);
}

TEST(MdResume, ReproducibleModeBitIdentical) {
  MdConfig c = mdtest::small_config();
  c.reproducible = true;
  c.dump_every = 25;
  check_resume(c, 120);
}

TEST(MdResume, ReproducibleModeSameBitsOnOneAndTwoThreads) {
  MdConfig c = mdtest::small_config();
  c.reproducible = true;
  c.cells = 16;  // 16384 atoms: enough for the force loop to use both threads
  c.steps = 30;
  c.equil_steps = 10;
  auto comm = comm::make_single_comm();
  testutil::TempDir d("md_threads");
  const int before = omp_get_max_threads();
  State states[2];
  for (int t = 1; t <= 2; ++t) {
    omp_set_num_threads(t);
    auto w = make(c, *comm);
    ASSERT_TRUE(w->begin(d.path()).is_ok());
    ASSERT_TRUE(run_to(*w, c.steps).is_ok());
    auto s = w->save();
    ASSERT_TRUE(s.is_ok());
    states[t - 1] = *s;
  }
  omp_set_num_threads(before);
  EXPECT_TRUE(same_state(states[0], states[1]));
}

}  // namespace
}  // namespace crucible::sim
