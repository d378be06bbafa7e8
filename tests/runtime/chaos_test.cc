// The chaos suite: `crucible launch` supervising real Open MPI ranks while
// faults are injected (fault.inject, docs/fault_tolerance.md). Each faulty job
// must finish by itself with a final model.safetensors bit-identical to an
// uninterrupted run of the same seed, and leave a true account in
// RUN/events.jsonl.
//
// Why bit-identical holds: a restart at the same world size replays the same
// steps from a checkpoint with the same loader position and Open MPI's
// reductions in the same order. A restart at another world size (4 ranks vs
// 2, the elastic fallback) changes the reduction order, so those tests run in
// dist.reproducible mode, whose fixed tree gives the same bits for any world
// size at the same global batch.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "ckpt/checkpoint.h"
#include "support/cli_runner.h"
#include "support/train_config.h"

namespace crucible::e2e {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string make_config(const TempDir& dir, const std::string& extra_fault = "") {
  testutil::SmallRun run;  // 12 steps, checkpoints at 4, 8, 12
  run.batch = 2;
  run.accum = 2;
  run.name = "chaos";
  run.sample_tokens = 0;
  run.extra = "[dist]\nbucket_mb = 0.02\n[fault]\nhang_timeout_s = 3\nrestart_backoff_s = 0.1\n" +
              extra_fault;
  return testutil::write_small_config(dir, run);
}

std::vector<std::string> launch_args(int ranks, const std::string& cfg, const std::string& run,
                                     std::vector<std::string> extra) {
  ::setenv("ASAN_OPTIONS", "detect_leaks=0", 1);  // see dist_train_test.cc
  std::vector<std::string> a = {"launch", "-n", std::to_string(ranks), "--threads", "1"};
  std::vector<std::string> train = {"--", "train", cfg};
  if (!run.empty()) train.insert(train.end(), {"--run-dir", run});
  size_t at = 0;  // launch options (e.g. --min-ranks) go before "--"
  while (at < extra.size() && extra[at] != "--") ++at;
  a.insert(a.end(), extra.begin(), extra.begin() + long(at));
  a.insert(a.end(), train.begin(), train.end());
  if (at < extra.size()) a.insert(a.end(), extra.begin() + long(at) + 1, extra.end());
  return a;
}

std::vector<json> events(const std::string& run) {
  std::vector<json> out;
  std::ifstream in(run + "/events.jsonl");
  for (std::string line; std::getline(in, line);) out.push_back(json::parse(line));
  return out;
}

std::vector<json> events_of(const std::string& run, const std::string& kind) {
  std::vector<json> out;
  for (auto& e : events(run))
    if (e["event"] == kind) out.push_back(e);
  return out;
}

std::string final_model(const std::string& run) {
  return read_file(run + "/ckpt/step_0000012/model.safetensors");
}

// Every visible checkpoint verifies and `latest` names one of them.
void expect_checkpoints_sound(const std::string& run) {
  auto list = ckpt::list_checkpoints(run + "/ckpt");
  ASSERT_TRUE(list);
  for (const auto& [step, name] : *list) {
    Status s = ckpt::verify_checkpoint(run + "/ckpt/" + name);
    EXPECT_TRUE(s.is_ok()) << name << ": " << s.message();
  }
  std::string latest = read_file(run + "/ckpt/latest");
  if (!latest.empty()) {
    latest.pop_back();  // '\n'
    EXPECT_TRUE(ckpt::verify_checkpoint(run + "/ckpt/" + latest).is_ok()) << latest;
  }
}

// The uninterrupted references, once per suite: default mode at 2 ranks and
// reproducible mode (any world size).
class Chaos : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("chaos_reference");
    const std::string cfg = make_config(*dir_);
    auto a = run_crucible(launch_args(2, cfg, *dir_ / "ref", {}));
    ASSERT_EQ(a.code, 0) << a.output;
    auto b = run_crucible(
        launch_args(2, cfg, *dir_ / "ref_repro", {"--", "--set", "dist.reproducible=true"}));
    ASSERT_EQ(b.code, 0) << b.output;
    ref_ = new std::string(final_model(*dir_ / "ref"));
    ref_repro_ = new std::string(final_model(*dir_ / "ref_repro"));
  }
  static void TearDownTestSuite() {
    delete ref_;
    delete ref_repro_;
    delete dir_;
  }
  void SetUp() override {
    ASSERT_TRUE(ref_ && !ref_->empty());
    ASSERT_TRUE(ref_repro_ && !ref_repro_->empty());
  }
  static TempDir* dir_;
  static std::string *ref_, *ref_repro_;
};
TempDir* Chaos::dir_ = nullptr;
std::string* Chaos::ref_ = nullptr;
std::string* Chaos::ref_repro_ = nullptr;

TEST_F(Chaos, KilledRankIsRestartedFromTheCheckpoint) {
  TempDir dir("chaos_kill");
  const std::string run = dir / "run";
  // Steps of a few ms would finish before the background save of step 4 is
  // on disk; slowed down (no effect on the math) they leave it time, as real
  // steps do.
  auto r = run_crucible(launch_args(
      2, make_config(dir), run,
      {"--", "--set", "fault.inject=[\"kill@7:rank=1\", \"slow@1:ms=150:attempt=all\"]"}));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(final_model(run) == *ref_) << "not bit-identical to the uninterrupted run";
  auto f = events_of(run, "failure");
  ASSERT_EQ(f.size(), 1u) << r.output;
  EXPECT_EQ(f[0]["what"], "died");
  EXPECT_EQ(f[0]["ranks"], json::array({1}));
  EXPECT_EQ(f[0]["phase"], "backward");
  EXPECT_EQ(f[0]["step"], 7);
  EXPECT_EQ(f[0]["resume_step"], 4);
  EXPECT_EQ(f[0]["steps_lost"], 3);
  EXPECT_LT(f[0]["detect_s"].get<double>(), 2.0);
  EXPECT_EQ(events_of(run, "recovered").size(), 1u);
  EXPECT_EQ(events_of(run, "finished").size(), 1u);
  EXPECT_NE(r.output.find("rank 1 (pid"), std::string::npos) << r.output;
  expect_checkpoints_sound(run);
}

TEST_F(Chaos, HungRankIsNamedAndRestarted) {
  TempDir dir("chaos_hang");
  const std::string run = dir / "run";
  auto r = run_crucible(
      launch_args(2, make_config(dir), run, {"--", "--set", "fault.inject=[\"hang@6:rank=1\"]"}));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(final_model(run) == *ref_) << "not bit-identical to the uninterrupted run";
  auto f = events_of(run, "failure");
  ASSERT_EQ(f.size(), 1u) << r.output;
  EXPECT_EQ(f[0]["what"], "hang");
  EXPECT_EQ(f[0]["ranks"], json::array({1}));
  // fault.hang_timeout_s = 3: detected within the timeout plus a few seconds.
  EXPECT_GE(f[0]["detect_s"].get<double>(), 3.0);
  EXPECT_LT(f[0]["detect_s"].get<double>(), 3.0 + 3.0);
  const std::string msg = f[0]["message"];
  EXPECT_NE(msg.find("rank 1 never arrived at gradient allreduce of step 6"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("last in forward of step 6"), std::string::npos) << msg;
  expect_checkpoints_sound(run);
}

// A pipeline's stage hung in a forward: the supervisor names the stage, the
// micro-batch and the action, and the stage waiting for it; the restarted
// job ends with the uninterrupted pipeline job's weights.
TEST_F(Chaos, HungPipelineStageIsNamedWithItsMicroBatch) {
  TempDir dir("chaos_pp_hang");
  const std::vector<std::string> pp = {"--", "--set", "dist.pp=2"};
  auto ref = run_crucible(launch_args(2, make_config(dir), dir / "ref", pp));
  ASSERT_EQ(ref.code, 0) << ref.output;
  const std::string run = dir / "run";
  auto faulty = pp;
  faulty.insert(faulty.end(), {"--set", "fault.inject=[\"hang@6:rank=1\"]"});
  auto r = run_crucible(launch_args(2, make_config(dir), run, faulty));
  ASSERT_EQ(r.code, 0) << r.output;
  auto f = events_of(run, "failure");
  ASSERT_EQ(f.size(), 1u) << r.output;
  EXPECT_EQ(f[0]["what"], "hang");
  EXPECT_EQ(f[0]["ranks"], json::array({1}));
  const std::string msg = f[0]["message"];
  EXPECT_NE(msg.find("rank 1 in F of micro-batch 0 (stage 1, chunk 0) in pipeline schedule of step 6"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("waiting for it: rank 0 in recv_grad of micro-batch 0 (stage 0, chunk 0)"), std::string::npos)
      << msg;
  EXPECT_TRUE(read_file(export_weights(run, 12)) == read_file(export_weights(dir / "ref", 12)))
      << "not bit-identical to the uninterrupted pipeline run";
}

TEST_F(Chaos, FailedCheckpointWriteIsRetriedFromTheOneBefore) {
  TempDir dir("chaos_ckpt_write");
  const std::string run = dir / "run";
  auto r = run_crucible(launch_args(
      2, make_config(dir), run, {"--", "--set", "fault.inject=[\"ckpt_write_error@8\"]"}));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(final_model(run) == *ref_) << "not bit-identical to the uninterrupted run";
  auto f = events_of(run, "failure");
  ASSERT_EQ(f.size(), 1u) << r.output;
  EXPECT_EQ(f[0]["what"], "error");
  EXPECT_EQ(f[0]["ranks"], json::array({0}));
  EXPECT_EQ(f[0]["resume_step"], 4);
  EXPECT_NE(f[0]["message"].get<std::string>().find("injected write error"), std::string::npos);
  EXPECT_NE(f[0]["message"].get<std::string>().find("latest still names step_0000004"),
            std::string::npos)
      << f[0]["message"];
  expect_checkpoints_sound(run);
}

TEST_F(Chaos, CorruptNewestCheckpointIsSkippedOnRestart) {
  TempDir dir("chaos_corrupt");
  const std::string run = dir / "run";
  auto r = run_crucible(
      launch_args(2, make_config(dir), run,
                  {"--", "--set",
                   "fault.inject=[\"ckpt_corrupt@8\", \"kill@11:rank=1\", "
                   "\"slow@1:ms=150:attempt=all\"]"}));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(final_model(run) == *ref_) << "not bit-identical to the uninterrupted run";
  auto f = events_of(run, "failure");
  ASSERT_EQ(f.size(), 1u) << r.output;
  EXPECT_EQ(f[0]["resume_step"], 4) << "the corrupt step 8 must not be resumed from";
  EXPECT_EQ(f[0]["steps_lost"], 7);
  EXPECT_NE(r.output.find("step_0000008/model.safetensors"), std::string::npos) << r.output;
  expect_checkpoints_sound(run);
}

TEST_F(Chaos, FourRanksKilledRankInReproducibleMode) {
  TempDir dir("chaos_four");
  const std::string run = dir / "run";
  // 4 ranks x 1 micro-batch = the reference's 2 x 2: the same global batch.
  auto r = run_crucible(launch_args(4, make_config(dir), run,
                                    {"--", "--set", "dist.reproducible=true", "--set",
                                     "train.grad_accum=1", "--set",
                                     "fault.inject=[\"kill@5:rank=3\"]"}));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(final_model(run) == *ref_repro_) << "not bit-identical to the uninterrupted run";
  auto f = events_of(run, "failure");
  ASSERT_EQ(f.size(), 1u) << r.output;
  EXPECT_EQ(f[0]["ranks"], json::array({3}));
}

TEST_F(Chaos, ElasticFallbackContinuesOnFewerRanks) {
  TempDir dir("chaos_elastic");
  const std::string run = dir / "run";
  // Rank 1 dies at step 6 in every attempt (a bad node): after two failures
  // at 2 ranks the job continues from step 4 on 1 rank with twice the
  // accumulation. Slowed steps give the background save of step 4 time to
  // finish before the kill, as real steps would.
  auto r = run_crucible(launch_args(
      2, make_config(dir), run,
      {"--min-ranks", "1", "--", "--set", "dist.reproducible=true", "--set",
       "fault.inject=[\"kill@6:rank=1:attempt=all\", \"slow@1:ms=150:attempt=all\"]"}));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(final_model(run) == *ref_repro_) << "not bit-identical to the uninterrupted run";
  EXPECT_EQ(events_of(run, "failure").size(), 2u);
  auto s = events_of(run, "shrink");
  ASSERT_EQ(s.size(), 1u) << r.output;
  EXPECT_EQ(s[0]["from"], 2);
  EXPECT_EQ(s[0]["to"], 1);
  EXPECT_EQ(s[0]["grad_accum"], 4);
  EXPECT_NE(r.output.find("written by 2 ranks, now 1"), std::string::npos) << r.output;
}

TEST_F(Chaos, RestartsAreBoundedWithASummary) {
  TempDir dir("chaos_give_up");
  const std::string run = dir / "run";
  auto r = run_crucible(launch_args(2, make_config(dir, "max_restarts = 1\n"), run,
                                    {"--", "--set",
                                     "fault.inject=[\"kill@6:rank=1:attempt=all\", "
                                     "\"slow@1:ms=150:attempt=all\"]"}));
  EXPECT_EQ(r.code, 4) << r.output;  // runtime::kExitGaveUp
  EXPECT_EQ(events_of(run, "failure").size(), 2u);
  EXPECT_EQ(events_of(run, "restart").size(), 1u);
  auto g = events_of(run, "gave_up");
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0]["checkpoint_step"], 4);
  EXPECT_NE(r.output.find("giving up after 1 restarts (fault.max_restarts = 1)"), std::string::npos)
      << r.output;
  EXPECT_NE(read_file(run + "/job.json").find("\"failed\""), std::string::npos);
  expect_checkpoints_sound(run);
}

TEST_F(Chaos, BadInputIsNotRetried) {
  TempDir dir("chaos_bad_input");
  auto r = run_crucible(launch_args(2, make_config(dir), dir / "run",
                                    {"--", "--set", "fault.inject=[\"kill@x\"]"}));
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("fault.inject: 'kill@x'"), std::string::npos) << r.output;
  EXPECT_TRUE(events_of(dir / "run", "restart").empty());
  auto bad = run_crucible(launch_args(2, make_config(dir), dir / "run2",
                                      {"--", "--set", "train.stepz=3"}));
  EXPECT_EQ(bad.code, 2) << bad.output;
  EXPECT_NE(bad.output.find("train.stepz"), std::string::npos) << bad.output;
}

// Polls for a run's progress: the signal must arrive mid-run, and the run has
// no other way to tell us.
void wait_for_steps(const std::string& run, size_t steps) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (count_lines(run + "/metrics.jsonl") < steps && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
}

// A supervised 2-rank job in the background whose steps are slowed (no
// effect on the math) to leave time for signals mid-run; args re-run it.
struct SlowJob {
  std::vector<std::string> args;
  Background job;
  SlowJob(const TempDir& dir, const std::string& run)
      : args(launch_args(2, make_config(dir), run,
                         {"--", "--set", "fault.inject=[\"slow@1:ms=150:attempt=all\"]"})),
        job(args, dir.path(), dir / "first.log") {}
};

// The newest runs/chaos-* under dir (the run a command without --run-dir used).
std::string the_run(const std::string& dir) {
  std::string best;
  for (const auto& e : fs::directory_iterator(dir + "/runs"))
    if (e.path().filename().string().rfind("chaos-", 0) == 0 && e.path().string() > best)
      best = e.path().string();
  return best;
}

// A hostfile that cannot hold the job is bad input: one line, exit 2, no
// restart and no mpirun started.
TEST_F(Chaos, UnworkableHostfileIsBadInput) {
  TempDir dir("chaos_hostfile");
  for (const std::string text : {"localhost slots=1\n", "localhost slots=abc\n", ""}) {
    write_file(dir / "hosts", text);
    auto a = launch_args(2, make_config(dir), dir / "run", {});
    a.insert(a.begin() + 1, {"--hostfile", dir / "hosts"});
    auto r = run_crucible(a);
    EXPECT_EQ(r.code, 2) << r.output;
    EXPECT_NE(r.output.find("[launch] " + dir / "hosts"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("mpirun"), std::string::npos) << r.output;
    EXPECT_FALSE(fs::exists(dir / "run")) << text;
  }
}

// A finished job run again: nothing to do at its train.steps, and trained
// further when more steps are asked for (not silently dropped).
TEST_F(Chaos, FinishedJobRelaunchedWithMoreStepsContinues) {
  TempDir dir("chaos_more_steps");
  const std::string cfg = make_config(dir), run = dir / "run";
  auto first = run_crucible(launch_args(2, cfg, run, {"--", "--set", "train.steps=8"}));
  ASSERT_EQ(first.code, 0) << first.output;
  auto same = run_crucible(launch_args(2, cfg, run, {"--", "--set", "train.steps=8"}));
  EXPECT_EQ(same.code, 0) << same.output;
  EXPECT_NE(same.output.find("has finished at step 8 (train.steps = 8); nothing to do"), std::string::npos)
      << same.output;
  auto more = run_crucible(launch_args(2, cfg, run, {"--", "--set", "train.steps=12"}));
  ASSERT_EQ(more.code, 0) << more.output;
  EXPECT_NE(more.output.find("continuing to train.steps = 12"), std::string::npos) << more.output;
  EXPECT_EQ(count_lines(run + "/metrics.jsonl"), 12u);
  EXPECT_TRUE(fs::exists(run + "/ckpt/step_0000012"));
}

TEST_F(Chaos, PreemptedJobResumesWhenTheSameCommandRunsAgain) {
  TempDir dir("chaos_preempt");
  // No --run-dir: the rerun must find the run by itself.
  SlowJob slow(dir, "");
  auto& [args, job] = slow;
  ASSERT_GT(job.pid, 0);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while ((!fs::exists(dir / "runs") || the_run(dir.path()).empty()) &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const std::string run = the_run(dir.path());
  wait_for_steps(run, 5);
  ASSERT_EQ(::kill(job.pid, SIGTERM), 0);
  EXPECT_EQ(job.wait(), 3) << read_file(job.log);  // stopped after checkpointing
  auto p = events_of(run, "preempted");
  ASSERT_EQ(p.size(), 1u) << read_file(job.log);
  EXPECT_EQ(p[0]["clean"], true);
  // The checkpoint is of the last step recorded: nothing was lost.
  const size_t steps = count_lines(run + "/metrics.jsonl");
  EXPECT_EQ(p[0]["checkpoint_step"], steps);
  EXPECT_LT(steps, 12u);
  expect_checkpoints_sound(run);

  auto again = run_crucible(args, dir.path());
  ASSERT_EQ(again.code, 0) << again.output;
  EXPECT_NE(again.output.find("continuing the unfinished run " + fs::relative(run, dir.path()).string()),
            std::string::npos)
      << again.output;
  EXPECT_TRUE(final_model(run) == *ref_) << "not bit-identical to the uninterrupted run";
  EXPECT_EQ(count_lines(run + "/metrics.jsonl"), 12u);
}

// A scheduler may signal the ranks rather than the launcher (Slurm sends
// SIGTERM to every task): one rank's signal stops the whole job at the same
// step boundary, after the checkpoint.
TEST_F(Chaos, SigtermToOneRankStopsTheJobCleanly) {
  TempDir dir("chaos_rank_sigterm");
  const std::string run = dir / "run";
  SlowJob slow(dir, run);
  auto& [args, job] = slow;
  ASSERT_GT(job.pid, 0);
  wait_for_steps(run, 3);
  auto up = events_of(run, "ranks_up");
  ASSERT_EQ(up.size(), 1u) << read_file(job.log);
  ASSERT_EQ(up[0]["pids"].size(), 2u);
  ASSERT_EQ(::kill(pid_t(up[0]["pids"][1].get<int64_t>()), SIGTERM), 0);
  EXPECT_EQ(job.wait(), 3) << read_file(job.log);
  auto p = events_of(run, "preempted");
  ASSERT_EQ(p.size(), 1u) << read_file(job.log);
  EXPECT_EQ(p[0]["clean"], true);
  EXPECT_EQ(p[0]["checkpoint_step"], count_lines(run + "/metrics.jsonl"));
  EXPECT_TRUE(events_of(run, "failure").empty()) << "a requested stop is not a failure";
  expect_checkpoints_sound(run);
  auto again = run_crucible(args, dir.path());
  ASSERT_EQ(again.code, 0) << again.output;
  EXPECT_TRUE(final_model(run) == *ref_) << "not bit-identical to the uninterrupted run";
}

TEST_F(Chaos, SupervisorKilledWithSigkillThenRerun) {
  TempDir dir("chaos_supervisor_kill");
  const std::string run = dir / "run";
  SlowJob slow(dir, run);
  auto& [args, job] = slow;
  ASSERT_GT(job.pid, 0);
  wait_for_steps(run, 6);
  ASSERT_EQ(::kill(job.pid, SIGKILL), 0);
  EXPECT_EQ(job.wait(), 128 + SIGKILL);
  // The orphaned ranks notice and leave: the run directory is free again.
  expect_checkpoints_sound(run);
  auto again = run_crucible(args, dir.path());
  ASSERT_EQ(again.code, 0) << again.output << read_file(job.log);
  EXPECT_NE(again.output.find("resumed from"), std::string::npos) << again.output;
  EXPECT_TRUE(final_model(run) == *ref_) << "not bit-identical to the uninterrupted run";
  expect_checkpoints_sound(run);
}

TEST_F(Chaos, CheckpointStallIsReportedPerSave) {
  // From the reference run: every checkpoint step reports what the loop paid.
  std::ifstream in(*dir_ / "ref/metrics.jsonl");
  int saves = 0;
  for (std::string line; std::getline(in, line);) {
    json m = json::parse(line);
    if (m["step"].get<int>() % 4 != 0) {
      EXPECT_FALSE(m.contains("ckpt_stall_ms")) << line;
      continue;
    }
    ++saves;
    ASSERT_TRUE(m.contains("ckpt_stall_ms")) << line;
    EXPECT_GE(m["ckpt_wait_ms"].get<double>(), 0.0);
    EXPECT_LE(m["ckpt_wait_ms"].get<double>(), m["ckpt_stall_ms"].get<double>());
    if (m["step"] == 12) {
      EXPECT_TRUE(m.contains("ckpt_flush_ms")) << line;
    }
  }
  EXPECT_EQ(saves, 3);
}

}  // namespace
}  // namespace crucible::e2e
