// The md workload's config: every impossible value is refused with one line
// naming its key, and so is a start the physics cannot take (overlapping
// atoms, a box smaller than two cut-offs, a time step that blows up).
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "md_helpers.h"
#include "support/files.h"

namespace crucible::sim {
namespace {

struct BadCase {
  const char* what;
  std::function<void(MdConfig&)> change;
  const char* expect;  // a piece of the message
};

TEST(MdConfig, DefaultsValidateAndBindEveryMember) {
  MdConfig c;
  EXPECT_TRUE(validate_md(c).is_ok());
  const auto fields = md_fields(c);
  EXPECT_EQ(fields.size(), 15u);
  for (const config::Field& f : fields) EXPECT_EQ(std::string(f.key).rfind("md.", 0), 0u) << f.key;
  EXPECT_EQ(md_atom_count(c), 4000);  // the defaults are configs/sim/md.toml's
}

TEST(MdConfig, RefusesImpossibleValuesNamingTheKey) {
  const BadCase cases[] = {
      {"cells", [](MdConfig& c) { c.cells = 0; }, "md.cells"},
      {"density", [](MdConfig& c) { c.density = -1; }, "md.density"},
      {"temperature", [](MdConfig& c) { c.temperature = 0; }, "md.temperature"},
      {"dt", [](MdConfig& c) { c.dt = 0; }, "md.dt"},
      {"dt big", [](MdConfig& c) { c.dt = 0.5; }, "md.dt"},
      {"steps", [](MdConfig& c) { c.steps = 0; }, "md.steps"},
      {"equil", [](MdConfig& c) { c.equil_steps = c.steps; }, "md.equil_steps"},
      {"tau", [](MdConfig& c) { c.thermostat_tau = 0.001; }, "md.thermostat_tau"},
      {"cutoff", [](MdConfig& c) { c.cutoff = 0.5; }, "md.cutoff"},
      {"skin", [](MdConfig& c) { c.skin = -0.1; }, "md.skin"},
      {"neighbor_every", [](MdConfig& c) { c.neighbor_every = -1; }, "md.neighbor_every"},
      {"thermo_every", [](MdConfig& c) { c.thermo_every = 0; }, "md.thermo_every"},
      {"dump_every", [](MdConfig& c) { c.dump_every = -5; }, "md.dump_every"},
      {"max_energy_jump", [](MdConfig& c) { c.max_energy_jump = 0; }, "md.max_energy_jump"},
      {"overlap", [](MdConfig& c) { c.density = 20; }, "overlapping atoms"},
      {"small box", [](MdConfig& c) { c.cells = 2; }, "smaller than two cut-offs"},
  };
  auto comm = comm::make_single_comm();
  for (const BadCase& b : cases) {
    MdConfig c;
    b.change(c);
    const Status s = validate_md(c);
    ASSERT_FALSE(s.is_ok()) << b.what;
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << b.what;
    EXPECT_NE(s.message().find(b.expect), std::string::npos) << b.what << ": " << s.message();
    EXPECT_EQ(s.message().find('\n'), std::string::npos) << b.what;
    EXPECT_EQ(s.message().rfind("[config] ", 0), 0u) << s.message();
    // The factory refuses it the same way.
    auto w = make_md_workload(c, *comm, 1);
    ASSERT_FALSE(w.is_ok()) << b.what;
    EXPECT_EQ(w.status().message(), s.message());
  }
}

// A start packed so tight that the first steps explode: stopped with a
// Status naming md.dt, before any NaN reaches the output.
TEST(MdConfig, BlowUpStopsWithOneLine) {
  MdConfig c = mdtest::small_config();
  c.density = 2.5;  // neighbours 0.83 sigma apart: u ~ +60 epsilon per pair
  c.cells = 6;
  c.dt = 0.02;
  c.equil_steps = 0;
  c.thermo_every = 1;
  auto comm = comm::make_single_comm();
  testutil::TempDir d("md_blowup");
  auto w = mdtest::make(c, *comm);
  ASSERT_TRUE(w->begin(d.path()).is_ok());
  Status s = mdtest::run_to(*w, c.steps);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("md.dt"), std::string::npos) << s.message();
  EXPECT_EQ(s.message().find('\n'), std::string::npos);
}

// md.start_file: a run starts from another run's md_final.xyz; a file with
// overlapping atoms, a missing lattice or a box too small is refused with one
// line naming the key and the file.
TEST(MdConfig, StartFileIsReadAndCheckedForOverlaps) {
  auto comm = comm::make_single_comm();
  testutil::TempDir d("md_start");
  MdConfig c = mdtest::small_config();
  c.steps = 20, c.equil_steps = 5;
  {
    auto w = mdtest::make(c, *comm);
    ASSERT_TRUE(w->begin(d.path()).is_ok());
    ASSERT_TRUE(mdtest::run_to(*w, c.steps).is_ok());
    ASSERT_TRUE(w->finish(d.path()).is_ok());
  }
  MdConfig from = c;
  from.start_file = d / "md_final.xyz";
  from.cells = 9;  // not used: N and the box come from the file
  auto w = make_md_workload(from, *comm, 3);
  ASSERT_TRUE(w.is_ok()) << w.status().message();
  ASSERT_TRUE((*w)->begin(d.path()).is_ok());
  ASSERT_TRUE(mdtest::run_to(**w, 10).is_ok());
  auto r = (*w)->finish(d.path());
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(int64_t((*r)["atoms"]), 256);

  const std::string lattice = "Lattice=\"8 0 0 0 8 0 0 0 8\"";
  const struct {
    std::string text, expect;
  } bad[] = {
      {"2\n" + lattice + "\nAr 1 1 1\nAr 1.3 1 1\n", "overlapping atoms"},
      {"2\n" + lattice + "\nAr 0.1 1 1\nAr 7.9 1 1\n", "overlapping atoms"},  // across the boundary
      {"2\nno lattice here\nAr 1 1 1\nAr 3 1 1\n", "Lattice="},
      {"3\n" + lattice + "\nAr 1 1 1\nAr 3 1 1\n", "atom line 3 of 3"},
      {"2\nLattice=\"4 0 0 0 4 0 0 0 4\"\nAr 1 1 1\nAr 3 1 1\n", "smaller than two cut-offs"},
  };
  for (const auto& b : bad) {
    testutil::write_file(d / "start.xyz", b.text);
    MdConfig m = c;
    m.start_file = d / "start.xyz";
    auto bw = make_md_workload(m, *comm, 3);
    ASSERT_FALSE(bw.is_ok()) << b.text;
    EXPECT_EQ(bw.status().code(), Code::kInvalidArgument);
    EXPECT_NE(bw.status().message().find(b.expect), std::string::npos) << bw.status().message();
    EXPECT_EQ(bw.status().message().rfind("[config] md.start_file ", 0), 0u)
        << bw.status().message();
  }
  MdConfig missing = c;
  missing.start_file = d / "absent.xyz";
  EXPECT_FALSE(make_md_workload(missing, *comm, 3).is_ok());
}

TEST(MdConfig, CorruptCheckpointIsRefused) {
  MdConfig c = mdtest::small_config();
  auto comm = comm::make_single_comm();
  testutil::TempDir d("md_corrupt");
  auto w = mdtest::make(c, *comm);
  ASSERT_TRUE(w->begin(d.path()).is_ok());
  ASSERT_TRUE(mdtest::run_to(*w, 5).is_ok());
  auto s = w->save();
  ASSERT_TRUE(s.is_ok());
  MdConfig bigger = c;
  bigger.cells = 5;
  auto other = mdtest::make(bigger, *comm);
  const Status st = other->load(*s, 5);
  EXPECT_EQ(st.code(), Code::kCorrupt) << st.message();
  EXPECT_NE(st.message().find("'pos'"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace crucible::sim
