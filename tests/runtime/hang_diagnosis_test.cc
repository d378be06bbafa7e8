// Culprit naming from heartbeat positions (runtime/hang_diagnosis.h).
#include "runtime/hang_diagnosis.h"

#include <gtest/gtest.h>

#include "parallel/schedule.h"

namespace crucible::runtime {
namespace {

TEST(HangDiagnosis, NamesTheRankThatNeverArrived) {
  // Rank 2 hangs in forward of step 6; ranks 0, 1, 3 went on to the
  // gradient allreduce and wait for it there.
  std::vector<RankView> v = {{0, true, 6, Phase::kReduce, 40, 9.0},
                             {1, true, 6, Phase::kReduce, 40, 9.1},
                             {2, true, 6, Phase::kForward, 38, 10.3},
                             {3, true, 6, Phase::kReduce, 40, 8.9}};
  HangDiagnosis d = diagnose_hang(v);
  EXPECT_EQ(d.culprits, std::vector<int>{2});
  EXPECT_EQ(d.message,
            "rank 2 never arrived at gradient allreduce of step 6 (rank 2 was last in forward of "
            "step 6, no progress for 10.3 s); ranks 0, 1, 3 wait there");
}

TEST(HangDiagnosis, SeveralLaggardsAndAnEarlierStep) {
  std::vector<RankView> v = {{0, true, 7, Phase::kSync, 50, 5},
                             {1, true, 6, Phase::kOptimizer, 44, 6},
                             {2, true, 6, Phase::kOptimizer, 44, 6}};
  HangDiagnosis d = diagnose_hang(v);
  EXPECT_EQ(d.culprits, (std::vector<int>{1, 2}));
  EXPECT_NE(d.message.find("ranks 1, 2 never arrived at step-end sync of step 7"),
            std::string::npos)
      << d.message;
  EXPECT_NE(d.message.find("rank 0 waits there"), std::string::npos) << d.message;
}

TEST(HangDiagnosis, EveryRankInTheSameCollectiveBlamesTheCollective) {
  std::vector<RankView> v = {{0, true, 3, Phase::kReduce, 20, 12},
                             {1, true, 3, Phase::kReduce, 20, 11}};
  HangDiagnosis d = diagnose_hang(v);
  EXPECT_EQ(d.culprits, (std::vector<int>{0, 1}));
  EXPECT_NE(d.message.find("every rank waits in gradient allreduce of step 3"), std::string::npos)
      << d.message;
  EXPECT_NE(d.message.find("collective itself is stuck"), std::string::npos);
}

TEST(HangDiagnosis, EveryRankStuckComputing) {
  std::vector<RankView> v = {{0, true, 3, Phase::kForward, 20, 12},
                             {1, true, 3, Phase::kForward, 20, 11}};
  HangDiagnosis d = diagnose_hang(v);
  EXPECT_EQ(d.message, "ranks 0, 1 made no progress in forward of step 3 for 12.0 s");
}

TEST(HangDiagnosis, SilentRanksComeFirst) {
  std::vector<RankView> v = {{0, true, 0, Phase::kSetup, 3, 30}, {1, false, 0, Phase::kSetup, 0, 30}};
  HangDiagnosis d = diagnose_hang(v);
  EXPECT_EQ(d.culprits, std::vector<int>{1});
  EXPECT_NE(d.message.find("rank 1 never sent a heartbeat"), std::string::npos) << d.message;
}

// A pipeline (stages run different actions; seq is the same for all in the
// schedule): stage 1 hangs in the forward of micro-batch 0, stage 0 waits for
// its gradient. The stage computing is the culprit, named with its action.
TEST(HangDiagnosis, PipelineNamesTheStageAndMicroBatch) {
  const int F = int(parallel::Op::kForward), recv_grad = int(parallel::Op::kRecvGradient);
  std::vector<RankView> v = {{0, true, 6, Phase::kPipeline, 30, 3.5, recv_grad, 0, 0, 0},
                             {1, true, 6, Phase::kPipeline, 30, 3.6, F, 0, 0, 1}};
  HangDiagnosis d = diagnose_hang(v);
  EXPECT_EQ(d.culprits, std::vector<int>{1});
  EXPECT_EQ(d.message,
            "no progress: rank 1 in F of micro-batch 0 (stage 1, chunk 0) in pipeline schedule of step 6 for "
            "3.6 s; waiting for it: rank 0 in recv_grad of micro-batch 0 (stage 0, chunk 0) in pipeline "
            "schedule of step 6");
  // Every stage in a receive: no computation to blame; the messages are stuck.
  v[1].op = int(parallel::Op::kRecvActivation);
  d = diagnose_hang(v);
  EXPECT_EQ(d.culprits, (std::vector<int>{0, 1}));
  EXPECT_NE(d.message.find("every stage waits in a receive"), std::string::npos) << d.message;
  // A stage still in an earlier step is behind, as without a pipeline.
  v[1] = {1, true, 5, Phase::kOptimizer, 28, 4.0};
  d = diagnose_hang(v);
  EXPECT_EQ(d.culprits, std::vector<int>{1});
}

TEST(HangDiagnosis, Positions) {
  EXPECT_EQ(describe_position(0, Phase::kSetup), "setup");
  EXPECT_EQ(describe_position(8, Phase::kSetup), "setup (resuming at step 8)");
  EXPECT_EQ(describe_position(9, Phase::kCheckpoint), "checkpoint of step 9");
}

}  // namespace
}  // namespace crucible::runtime
