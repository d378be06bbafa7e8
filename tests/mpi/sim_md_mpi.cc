// The md workload over 2 and 4 MPI ranks (slabs along x, ghosts and
// migration through Comm) against the same run on one rank:
//  - reproducible mode: the same bits -- positions, velocities, forces, the
//    samples, the summary and the trajectory file -- and a checkpoint taken
//    on one rank resumes on all of them with the bits of the one-rank run;
//  - fast mode: the same trajectory to 1e-9 (sums in another order differ in
//    their last bits, and 40 steps of a chaotic system amplify that only so far).
// Each rank computes the one-rank reference alone (a split Comm of itself).
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>

#include "comm/comm.h"
#include "sim/md/md_helpers.h"
#include "support/files.h"

namespace crucible::sim {
namespace {

using mdtest::make;
using mdtest::run_to;
using mdtest::same_state;

comm::Comm& world() { return **comm::world(); }

std::unique_ptr<comm::Comm> alone() {
  auto c = world().split(world().rank(), 0);
  EXPECT_TRUE(c.is_ok());
  return std::move(c.value());
}

// 1372 atoms, box 11.97 sigma: four slabs of 2.99 >= r_c + skin.
MdConfig config(bool reproducible) {
  MdConfig c = mdtest::small_config();
  c.cells = 7;
  c.steps = 40;
  c.equil_steps = 10;
  c.thermo_every = 5;
  c.dump_every = 10;
  c.reproducible = reproducible;
  return c;
}

struct Outcome {
  State state;
  nlohmann::json summary;
  std::string trajectory;
};

Outcome run(const MdConfig& c, comm::Comm& comm, const State* from = nullptr, int64_t k = 0) {
  Outcome o;
  testutil::TempDir d("md_mpi_" + std::to_string(comm.size()));
  auto w = make(c, comm);
  if (!w) return o;
  if (from) {
    EXPECT_TRUE(w->load(*from, k).is_ok());
  }
  EXPECT_TRUE(w->begin(d.path()).is_ok());
  EXPECT_TRUE(run_to(*w, c.steps).is_ok());
  auto s = w->save();
  EXPECT_TRUE(s.is_ok());
  auto r = w->finish(d.path());
  EXPECT_TRUE(r.is_ok());
  o.state = *s;
  o.summary = *r;
  o.summary.erase("ranks");
  if (comm.rank() == 0) o.trajectory = testutil::read_file(d / "md_traj.xyz");
  return o;
}

TEST(SimMdMpi, ReproducibleModeGivesOneRankBits) {
  const MdConfig c = config(true);
  auto self = alone();
  const Outcome one = run(c, *self);
  const Outcome many = run(c, world());
  if (world().rank() != 0) return;  // the whole state lives on rank 0
  EXPECT_TRUE(same_state(one.state, many.state));
  EXPECT_EQ(one.state.scalars.dump(), many.state.scalars.dump());
  EXPECT_EQ(one.summary.dump(), many.summary.dump());
  EXPECT_GE(int64_t(many.summary["neighbor_rebuilds"]), 2);  // atoms migrated between list builds
  EXPECT_FALSE(one.trajectory.empty());
  EXPECT_TRUE(one.trajectory == many.trajectory);
}

TEST(SimMdMpi, OneRankCheckpointResumesOnAllRanksWithTheSameBits) {
  const MdConfig c = config(true);
  auto self = alone();
  const Outcome one = run(c, *self);
  // The checkpoint at step 17, from one rank, broadcast as the driver's load
  // would hand it to every rank.
  testutil::TempDir d("md_mpi_ckpt");
  auto first = make(c, *self);
  ASSERT_TRUE(first->begin(d.path()).is_ok());
  ASSERT_TRUE(run_to(*first, 17).is_ok());
  auto at17 = first->save();
  ASSERT_TRUE(at17.is_ok());
  MdConfig no_dump = c;
  no_dump.dump_every = 0;  // the trajectory file belongs to the first run's directory
  Outcome whole = run(no_dump, *self);
  Outcome resumed = run(no_dump, world(), &*at17, 17);
  if (world().rank() != 0) return;
  EXPECT_TRUE(same_state(whole.state, resumed.state));
  EXPECT_EQ(whole.summary.dump(), resumed.summary.dump());
  (void)one;
}

TEST(SimMdMpi, FastModeMatchesOneRankClosely) {
  const MdConfig c = config(false);
  auto self = alone();
  const Outcome one = run(c, *self);
  const Outcome many = run(c, world());
  if (world().rank() != 0) return;
  for (const char* name : {"pos", "vel", "force"}) {
    std::vector<double> a, b;
    ASSERT_TRUE(unpack_f64(one.state, name, SIZE_MAX, &a).is_ok());
    ASSERT_TRUE(unpack_f64(many.state, name, SIZE_MAX, &b).is_ok());
    ASSERT_EQ(a.size(), b.size());
    double worst = 0;
    for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(a[i] - b[i]));
    EXPECT_LT(worst, 1e-9) << name;
  }
  EXPECT_NEAR(double(one.summary["pressure_mean"]), double(many.summary["pressure_mean"]), 1e-9);
  EXPECT_NEAR(double(one.summary["pe_per_atom_mean"]), double(many.summary["pe_per_atom_mean"]),
              1e-11);
}

TEST(SimMdMpi, FastModeResumesWithTheSameBitsOnTheseRanks) {
  const MdConfig c = config(false);
  MdConfig no_dump = c;
  no_dump.dump_every = 0;
  const Outcome whole = run(no_dump, world());
  testutil::TempDir d("md_mpi_fast_ckpt");
  auto first = make(no_dump, world());
  ASSERT_TRUE(first->begin(d.path()).is_ok());
  ASSERT_TRUE(run_to(*first, 23).is_ok());
  auto at23 = first->save();
  ASSERT_TRUE(at23.is_ok());
  // Every rank gets rank 0's whole state, as the driver's load does.
  State state = *at23;
  std::string scalars = state.scalars.dump();
  int64_t n = int64_t(scalars.size());
  ASSERT_TRUE(world().broadcast(&n, sizeof n, 0).is_ok());
  scalars.resize(size_t(n));
  ASSERT_TRUE(world().broadcast(scalars.data(), scalars.size(), 0).is_ok());
  state.scalars = nlohmann::json::parse(scalars);
  std::vector<StateArray> arrays = world().rank() == 0 ? state.arrays : std::vector<StateArray>{};
  int64_t count = int64_t(arrays.size());
  ASSERT_TRUE(world().broadcast(&count, sizeof count, 0).is_ok());
  arrays.resize(size_t(count));
  for (StateArray& a : arrays) {
    std::string name = a.name;
    int64_t bytes = int64_t(a.bytes.size()), len = int64_t(name.size());
    int64_t dims[2] = {a.shape.size() > 0 ? a.shape[0] : 0, a.shape.size() > 1 ? a.shape[1] : 0};
    ASSERT_TRUE(world().broadcast(&len, sizeof len, 0).is_ok());
    name.resize(size_t(len));
    ASSERT_TRUE(world().broadcast(name.data(), name.size(), 0).is_ok());
    ASSERT_TRUE(world().broadcast(&bytes, sizeof bytes, 0).is_ok());
    ASSERT_TRUE(world().broadcast(dims, sizeof dims, 0).is_ok());
    a.bytes.resize(size_t(bytes));
    if (bytes) {
      ASSERT_TRUE(world().broadcast(a.bytes.data(), a.bytes.size(), 0).is_ok());
    }
    a.name = name, a.dtype = "F64", a.shape = {dims[0], dims[1]};
  }
  state.arrays = arrays;
  const Outcome resumed = run(no_dump, world(), &state, 23);
  if (world().rank() != 0) return;
  EXPECT_TRUE(same_state(whole.state, resumed.state));
}

TEST(SimMdMpi, TooManyRanksForTheBoxIsRefused) {
  MdConfig c = mdtest::small_config();  // box 6.84 sigma: at most 2 slabs of r_c + skin
  auto w = make_md_workload(c, world(), 1);
  if (world().size() <= 2) {
    EXPECT_TRUE(w.is_ok());
    return;
  }
  ASSERT_FALSE(w.is_ok());
  EXPECT_NE(w.status().message().find("slabs thinner than md.cutoff + md.skin"), std::string::npos)
      << w.status().message();
}

}  // namespace
}  // namespace crucible::sim
