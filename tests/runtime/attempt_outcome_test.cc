// The outcome of a supervised attempt from what the supervisor knows of its
// ranks (runtime/attempt_outcome.h), and the restart policy
// (runtime/restart_policy.h): the situations a job meets, one by one.
#include "runtime/attempt_outcome.h"

#include <gtest/gtest.h>

#include "runtime/restart_policy.h"

namespace crucible::runtime {
namespace {

// A rank on `host` last heard from at `beat`, at `step` in `phase`.
RankState rank_at(const std::string& host, double beat, int64_t step, Phase phase, bool local = false) {
  RankState r;
  r.seen = true;
  r.local = local;
  r.last.host = host;
  r.last.step = step;
  r.last.phase = phase;
  r.last_beat = r.last_change = beat;
  return r;
}
RankState exited(RankState r, int code, const std::string& msg = "") {
  r.exited = true;
  r.code = code;
  r.message = msg;
  return r;
}

TEST(AttemptOutcome, EveryRankReportedZeroAtTheTargetIsFinished) {
  std::vector<RankState> v = {exited(rank_at("a", 9, 20, Phase::kDone), 0), exited(rank_at("b", 9, 20, Phase::kDone), 0)};
  EXPECT_EQ(classify_end(v, 0, 20, false, {}, 10).outcome, Outcome::kFinished);
}

TEST(AttemptOutcome, LauncherZeroShortOfTheTargetWithASilentRankIsADeath) {
  // mpirun can end with 0 when a rank on another host was SIGKILLed.
  std::vector<RankState> v = {exited(rank_at("a", 9.9, 6, Phase::kReduce), 0), rank_at("b", 8.0, 6, Phase::kForward)};
  AttemptResult r = classify_end(v, 0, 20, false, {}, 10);
  EXPECT_EQ(r.outcome, Outcome::kFailed);
  EXPECT_EQ(r.what, "died");
  EXPECT_EQ(r.culprits, std::vector<int>{1});
  EXPECT_NE(r.message.find("without a report from rank 1 (host b, last in forward of step 6)"), std::string::npos)
      << r.message;
  EXPECT_NEAR(r.detect_s, 2.0, 1e-9);
}

TEST(AttemptOutcome, AStopOrAnExitThreeIsPreemptionCleanOnlyIfEveryReportSaysStopped) {
  std::vector<RankState> v = {exited(rank_at("a", 9, 7, Phase::kCheckpoint), 3), rank_at("a", 9, 7, Phase::kCheckpoint)};
  AttemptResult r = classify_end(v, 3, 20, true, {}, 10);
  EXPECT_EQ(r.outcome, Outcome::kPreempted);
  EXPECT_TRUE(r.clean_stop);
  v[1] = exited(v[1], 1, "disk full");
  EXPECT_FALSE(classify_end(v, 1, 20, true, {}, 10).clean_stop);
}

TEST(AttemptOutcome, ARankExitingTwoIsBadInputWithItsMessage) {
  std::vector<RankState> v = {exited(rank_at("a", 1, 0, Phase::kSetup), 2, "[config] bad key"),
                              exited(rank_at("a", 1, 0, Phase::kSetup), 2, "[config] bad key")};
  AttemptResult r = classify_end(v, 2, 20, false, {}, 2);
  EXPECT_EQ(r.outcome, Outcome::kBadInput);
  EXPECT_EQ(r.message, "[config] bad key");
}

TEST(AttemptOutcome, AnErrorReportNamesTheRankAndItsMessage) {
  std::vector<RankState> v = {rank_at("a", 5, 4, Phase::kReduce), exited(rank_at("a", 5, 4, Phase::kCheckpoint), 1, "no space")};
  AttemptResult r = classify_end(v, 1, 20, false, {}, 6);
  EXPECT_EQ(r.what, "error");
  EXPECT_EQ(r.culprits, std::vector<int>{1});
  EXPECT_EQ(r.message, "rank 1 failed in checkpoint of step 4: no space");
}

TEST(AttemptOutcome, AnErrorReportAfterADeathBlamesTheDeath) {
  // Rank 1 vanished at 5.0; rank 0's collective failed because of it at 7.0.
  std::vector<RankState> v = {exited(rank_at("a", 7.0, 4, Phase::kReduce), 1, "[dist] allreduce: peer lost"),
                              rank_at("b", 5.0, 4, Phase::kBackward)};
  AttemptResult r = classify_end(v, 1, 20, false, {}, 7.5);
  EXPECT_EQ(r.what, "died");
  EXPECT_EQ(r.culprits, std::vector<int>{1});
  // The same report at about the time of the death is its own failure.
  v[1].last_beat = 6.9;
  EXPECT_EQ(classify_end(v, 1, 20, false, {}, 7.5).what, "error");
}

TEST(AttemptOutcome, TheRanksThatStoppedTogetherAreTheCulpritsAndTheirWholeHostIsNamed) {
  // Host b's two ranks stopped at 8.0 (its processes killed); mpirun ended
  // host a's ranks 1.5 s later. The probe found b answering.
  std::vector<RankState> v = {rank_at("a", 9.5, 6, Phase::kReduce), rank_at("a", 9.5, 6, Phase::kReduce),
                              rank_at("b", 8.0, 6, Phase::kForward), rank_at("b", 8.1, 6, Phase::kForward)};
  std::vector<Reach> reach = {Reach::kAnswers, Reach::kAnswers, Reach::kAnswers, Reach::kAnswers};
  AttemptResult r = classify_end(v, 137, 20, false, reach, 10);
  EXPECT_EQ(r.what, "died");
  EXPECT_EQ(r.culprits, (std::vector<int>{2, 3}));
  ASSERT_EQ(r.hosts.size(), 1u);
  EXPECT_EQ(r.hosts[0].host, "b");
  EXPECT_TRUE(r.hosts[0].whole_host);
  EXPECT_NE(r.message.find("every rank on host b died (the host answers: its processes are gone)"), std::string::npos)
      << r.message;
}

TEST(AttemptOutcome, OneRankOfAHostIsNotTheWholeHost) {
  std::vector<RankState> v = {rank_at("a", 9.5, 6, Phase::kReduce), rank_at("b", 9.5, 6, Phase::kReduce),
                              rank_at("b", 8.0, 6, Phase::kForward)};
  AttemptResult r = classify_end(v, 137, 20, false, {}, 10);
  EXPECT_EQ(r.culprits, std::vector<int>{2});
  ASSERT_EQ(r.hosts.size(), 1u);
  EXPECT_FALSE(r.hosts[0].whole_host);
  EXPECT_EQ(r.message.find("every rank"), std::string::npos) << r.message;
}

TEST(AttemptOutcome, OnOneMachineNoDeathIsAHostLoss) {
  std::vector<RankState> v = {rank_at("a", 8, 6, Phase::kReduce), rank_at("a", 8, 6, Phase::kReduce)};
  AttemptResult r = classify_end(v, 137, 20, false, {}, 10);
  EXPECT_EQ(r.what, "died");
  for (const HostLoss& h : r.hosts) EXPECT_FALSE(h.whole_host);
}

TEST(AttemptOutcome, SilenceCountsOnlyForRanksOnOtherHostsAfterTheWindow) {
  std::vector<RankState> v = {rank_at("a", 0.0, 6, Phase::kReduce, /*local=*/true),  // watched by pid
                              rank_at("b", 7.5, 6, Phase::kReduce),                  // within the window
                              rank_at("c", 6.0, 6, Phase::kForward),                 // silent
                              exited(rank_at("d", 0.0, 6, Phase::kDone), 0)};        // gone cleanly
  EXPECT_EQ(silent_ranks(v, 10, 3.0), std::vector<int>{2});
}

TEST(AttemptOutcome, AHostThatDoesNotAnswerIsLostAndNamedAsUnreachable) {
  std::vector<RankState> v = {rank_at("host1", 9.9, 6, Phase::kReduce, true), rank_at("host2", 6.5, 6, Phase::kForward)};
  std::vector<Reach> reach = {Reach::kUnknown, Reach::kNoAnswer};
  AttemptResult r = classify_silence(v, {1}, reach, 3.0, 10);
  EXPECT_EQ(r.outcome, Outcome::kFailed);
  EXPECT_EQ(r.what, "host lost");
  EXPECT_EQ(r.culprits, std::vector<int>{1});
  ASSERT_EQ(r.hosts.size(), 1u);
  EXPECT_TRUE(r.hosts[0].whole_host);
  EXPECT_EQ(r.hosts[0].reach, Reach::kNoAnswer);
  EXPECT_NEAR(r.detect_s, 3.5, 1e-9);
  EXPECT_EQ(r.message,
            "host host2 is unreachable: no heartbeat from its rank 1 for 3.5 s (window 3.0 s; last in forward "
            "of step 6) and nothing answers at its address (link or host down)");
}

TEST(AttemptOutcome, AHostWhoseProcessesAreGoneAnswersAndIsNotUnreachable) {
  std::vector<RankState> v = {rank_at("host1", 9.9, 6, Phase::kReduce, true), rank_at("host2", 6.5, 6, Phase::kForward)};
  AttemptResult r = classify_silence(v, {1}, {Reach::kUnknown, Reach::kAnswers}, 3.0, 10);
  EXPECT_EQ(r.what, "died");
  EXPECT_NE(r.message.find("every process on host host2 is gone"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("the host answers"), std::string::npos) << r.message;
}

TEST(AttemptOutcome, HungIsPastItsLimitSetupHavingTheLongerOne) {
  std::vector<RankState> v = {rank_at("a", 0, 0, Phase::kSetup), rank_at("a", 0, 3, Phase::kForward)};
  v[0].last_change = v[1].last_change = 0;
  EXPECT_EQ(first_hung(v, 50, 100, 60), -1);
  EXPECT_EQ(first_hung(v, 70, 100, 60), 1);
  v[1] = exited(v[1], 0);
  EXPECT_EQ(first_hung(v, 70, 100, 60), -1);
  EXPECT_EQ(first_hung(v, 101, 100, 60), 0);
}

TEST(RestartPolicy, ShrinkKeepsTheGlobalBatchWholeAndReproducibleModePowersOfTwo) {
  EXPECT_EQ(shrunk_world(12, 1, 3, false), 3);   // 4 ranks x 3 -> 3 ranks x 4
  EXPECT_EQ(shrunk_world(8, 1, 3, false), 2);    // 3 does not divide 8
  EXPECT_EQ(shrunk_world(12, 1, 3, true), 0);    // 2 x 6 and 1 x 12: 6 and 12 are not powers of two
  EXPECT_EQ(shrunk_world(8, 1, 3, true), 2);
  EXPECT_EQ(shrunk_world(8, 3, 3, false), 0);    // nothing at or above min_ranks
}

TEST(RestartPolicy, BackoffDoublesUpToAMinute) {
  EXPECT_DOUBLE_EQ(restart_backoff_s(1, 1.5), 1.5);
  EXPECT_DOUBLE_EQ(restart_backoff_s(3, 1.5), 6.0);
  EXPECT_DOUBLE_EQ(restart_backoff_s(20, 1.5), 60.0);
}

}  // namespace
}  // namespace crucible::runtime
