// The climate workload over 2 and 4 ranks (latitude bands, halo rows by
// point-to-point messages): the fields, the diagnostics, the snapshots and
// the summary are bit-identical to one rank's -- a stencil does not depend
// on the decomposition, and the diagnostics add row sums in row order. A
// state saved by one rank resumes on the world and ends where one rank does.
#include <gtest/gtest.h>

#include <string>

#include "comm/comm.h"
#include "sim/climate/climate.h"
#include "support/files.h"

namespace crucible::sim {
namespace {

comm::Comm& world() { return **comm::world(); }

ClimateConfig config(int test_case) {
  ClimateConfig c;
  c.test_case = test_case;
  c.nlat = 24;
  c.days = 1;
  c.output_every_h = 8;
  c.diag_every = 4;
  if (test_case == 2) c.alpha_deg = 60;  // over the polar rows of the outer bands
  return c;
}

std::unique_ptr<Workload> make(const ClimateConfig& c, comm::Comm& comm) {
  auto w = make_climate_workload(c, comm, 1);
  EXPECT_TRUE(w.is_ok()) << w.status().message();
  return w ? std::move(*w) : nullptr;
}

Status run_to(Workload& w, int64_t step) {
  while (w.steps_done() < step) CRUCIBLE_RETURN_IF_ERROR(w.step());
  return Status::ok();
}

void expect_same_state(const State& a, const State& b) {
  EXPECT_EQ(a.scalars.dump(), b.scalars.dump());
  ASSERT_EQ(a.arrays.size(), b.arrays.size());
  for (size_t k = 0; k < a.arrays.size(); ++k)
    EXPECT_TRUE(a.arrays[k].bytes == b.arrays[k].bytes)
        << "array " << a.arrays[k].name << " differs";
}

TEST(SimClimateMpi, RanksGiveTheOneRankResultBitForBit) {
  comm::Comm& comm = world();
  ASSERT_LE(comm.size(), 24);
  for (int test_case : {2, 6}) {
    const ClimateConfig c = config(test_case);
    // Every rank runs the one-rank reference too (small), so the
    // collective calls below stay matched.
    auto single = comm::make_single_comm();
    auto ref = make(c, *single);
    auto dist = make(c, comm);
    ASSERT_TRUE(ref && dist);
    ASSERT_TRUE(ref->begin(".").is_ok());
    ASSERT_TRUE(dist->begin(".").is_ok());
    ASSERT_TRUE(run_to(*ref, ref->total_steps()).is_ok());
    ASSERT_TRUE(run_to(*dist, dist->total_steps()).is_ok());
    // metrics() is the same on every rank (the diagnostics are gathered).
    EXPECT_EQ(ref->metrics().dump(), dist->metrics().dump()) << "case " << test_case;
    auto s_ref = ref->save();
    auto s_dist = dist->save();
    ASSERT_TRUE(s_ref.is_ok() && s_dist.is_ok());
    if (comm.rank() == 0) expect_same_state(*s_ref, *s_dist);
    testutil::TempDir d1("sim_climate_mpi_ref"), d2("sim_climate_mpi_dist");  // per process
    auto sum_ref = ref->finish(d1.path());
    auto sum_dist = dist->finish(d2.path());
    ASSERT_TRUE(sum_ref.is_ok() && sum_dist.is_ok());
    if (comm.rank() == 0) {
      nlohmann::json a = *sum_ref, b = *sum_dist;
      EXPECT_EQ(b["ranks"], comm.size());
      a.erase("ranks");
      b.erase("ranks");
      EXPECT_EQ(a.dump(), b.dump()) << "case " << test_case;
    }
  }
}

TEST(SimClimateMpi, OneRanksCheckpointResumesOnTheWorld) {
  comm::Comm& comm = world();
  const ClimateConfig c = config(2);
  auto single = comm::make_single_comm();
  auto ref = make(c, *single);
  ASSERT_TRUE(ref->begin(".").is_ok());
  const int64_t k = ref->total_steps() / 3 + 1;
  ASSERT_TRUE(run_to(*ref, k).is_ok());
  auto mid = ref->save();  // one rank's whole state, as every rank of the world is given it
  ASSERT_TRUE(mid.is_ok());
  ASSERT_TRUE(run_to(*ref, ref->total_steps()).is_ok());
  auto end_ref = ref->save();

  auto dist = make(c, comm);
  ASSERT_TRUE(dist->load(*mid, k).is_ok());
  ASSERT_TRUE(dist->begin(".").is_ok());
  ASSERT_TRUE(run_to(*dist, dist->total_steps()).is_ok());
  auto end_dist = dist->save();
  ASSERT_TRUE(end_dist.is_ok());
  if (comm.rank() == 0) expect_same_state(*end_ref, *end_dist);
}

}  // namespace
}  // namespace crucible::sim
