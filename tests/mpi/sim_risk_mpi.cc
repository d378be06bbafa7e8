// `crucible sim risk` over 2 and 4 MPI ranks: the summary, the metrics and
// the saved state are bit-identical to one rank's (scenario s depends only
// on (seed, s); sums and quantiles run in scenario or sorted order), with
// batches that do not split evenly over the ranks; a state saved by a
// one-rank run resumes on every rank count to the same bits.
#include <gtest/gtest.h>

#include <memory>

#include "comm/comm.h"
#include "sim/risk/risk_test_util.h"
#include "support/files.h"

namespace crucible::sim::risk {
namespace {

comm::Comm* world() { return *comm::world(); }

RiskConfig book() {
  RiskConfig c = testing::mixed_book(30000, 7001);  // 5 steps, 7001 = 7 * 1000 + 1: uneven shares
  c.copula = "student";
  c.var_levels = {0.95, 0.99};
  return c;
}

TEST(SimRisk, RanksGiveTheSingleRankBits) {
  const RiskConfig c = book();
  std::unique_ptr<Workload> many = testing::make(c, *world());
  ASSERT_TRUE(many);
  while (many->steps_done() < many->total_steps()) ASSERT_TRUE(many->step().is_ok());
  Result<State> state = many->save();
  ASSERT_TRUE(state.is_ok());
  // Rank 0 alone writes the workload's files.
  std::unique_ptr<testutil::TempDir> dir;
  if (world()->rank() == 0) dir = std::make_unique<testutil::TempDir>("sim_risk_ranks");
  Result<nlohmann::json> summary = many->finish(dir ? dir->path() : "/nonexistent");
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  if (world()->rank() != 0) return;
  auto single = comm::make_single_comm();
  std::unique_ptr<Workload> one = testing::make(c, *single);
  const nlohmann::json one_summary = testing::run_to_end(*one, dir->path());
  EXPECT_EQ(summary->dump(), one_summary.dump());
  EXPECT_EQ(many->metrics().dump(), one->metrics().dump());
  Result<State> one_state = one->save();
  ASSERT_TRUE(one_state.is_ok());
  ASSERT_NE(state->find("loss"), nullptr);
  EXPECT_EQ(state->find("loss")->bytes, one_state->find("loss")->bytes);
  EXPECT_EQ(state->find("tail_accumulators")->bytes, one_state->find("tail_accumulators")->bytes);
  EXPECT_GT(many->metrics()["tail_p"].get<double>(), 0.0);
}

TEST(SimRisk, OneRankStateResumesOnEveryRankCount) {
  const RiskConfig c = book();
  auto single = comm::make_single_comm();
  // Every rank makes the one-rank state of step 2 itself (the driver would
  // read it from the checkpoint), loads it and continues over the world.
  std::unique_ptr<Workload> first = testing::make(c, *single);
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(first->step().is_ok());
  Result<State> saved = first->save();
  ASSERT_TRUE(saved.is_ok());
  std::unique_ptr<Workload> resumed = testing::make(c, *world());
  ASSERT_TRUE(resumed->load(*saved, 2).is_ok());
  while (resumed->steps_done() < resumed->total_steps()) ASSERT_TRUE(resumed->step().is_ok());
  if (world()->rank() != 0) return;
  std::unique_ptr<Workload> whole = testing::make(c, *single);
  while (whole->steps_done() < whole->total_steps()) ASSERT_TRUE(whole->step().is_ok());
  EXPECT_EQ(resumed->metrics().dump(), whole->metrics().dump());
}

}  // namespace
}  // namespace crucible::sim::risk
