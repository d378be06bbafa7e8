// The README's own path, interrupted and resumed: `crucible train` on the
// embedded default (curation on with profile auto, the tokenizer trained into
// the ./data cache), killed with SIGKILL, then `--resume` on the run
// directory, by hand and under `crucible launch` with a rank killed (data
// and pipeline parallel). The
// resumed run must be the same run: the final model.safetensors byte for byte
// that of an uninterrupted run, metrics.jsonl with every step exactly once,
// and no curation or tokenizer training on resume (the checkpoint pins the
// data). A shorter schedule than the default's 260 steps (--set train.steps)
// keeps the suite fast; everything else is the user's default.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "support/cli_runner.h"
#include "support/kernel_harness.h"

namespace crucible::e2e {
namespace {

namespace fs = std::filesystem;

// The embedded default with a short schedule: 24 steps, checkpoints at 8, 16, 24.
std::vector<std::string> default_train(const std::string& run_dir, int steps = 24, int every = 8,
                                       std::vector<std::string> more = {}) {
  std::vector<std::string> a = {"train",     "--run-dir", run_dir,
                                "--set",     "train.steps=" + std::to_string(steps),
                                "--set",     "ckpt.every=" + std::to_string(every),
                                "--set",     "train.eval_every=12",
                                "--set",     "train.threads=1",
                                "--set",     "run.sample_tokens=0"};
  a.insert(a.end(), more.begin(), more.end());
  return a;
}


std::vector<int64_t> one_to(int64_t n) {
  std::vector<int64_t> v;
  for (int64_t i = 1; i <= n; ++i) v.push_back(i);
  return v;
}

std::string ckpt(const std::string& run, int step) {
  char name[32];
  std::snprintf(name, sizeof name, "/ckpt/step_%07d", step);
  return run + name;
}

size_t count_of(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// Starts `args` in the background and SIGKILLs it once `ready()` holds.
void kill_when(const TempDir& dir, const std::vector<std::string>& args, const std::function<bool()>& ready,
               const std::string& log) {
  Background job(args, dir.path(), log);
  const bool reached = poll_until(ready, 300);
  ::kill(job.pid, SIGKILL);
  const int code = job.wait();
  ASSERT_TRUE(reached) << "the run never got there:\n" << read_file(log);
  ASSERT_EQ(code, 128 + SIGKILL) << read_file(log);
}

TEST(ResumeDefault, KilledAtARandomStepResumesToTheSameRun) {
  TempDir dir("resume_default");
  const std::string straight = "runs/straight", killed = "runs/killed";
  auto ref = run_crucible(default_train(straight), dir.path());
  ASSERT_EQ(ref.code, 0) << ref.output;
  ASSERT_NE(ref.output.find("profile short"), std::string::npos) << ref.output;
  ASSERT_NE(ref.output.find("14532 (2.4 MB) kept"), std::string::npos) << ref.output;

  std::mt19937 rng(unsigned(testing::test_seed()));
  const size_t kill_at = 9 + rng() % 12;  // after the first checkpoint (8), before the end
  SCOPED_TRACE("killed after step " + std::to_string(kill_at));
  const std::string run = dir / killed;
  kill_when(dir, default_train(killed),
            [&] { return fs::exists(ckpt(run, 8)) && count_lines(run + "/metrics.jsonl") >= kill_at; },
            dir / "killed.log");

  // The user's resume: no config, no --set; everything comes from the run.
  auto resumed = run_crucible({"train", "--resume", "--run-dir", killed}, dir.path());
  ASSERT_EQ(resumed.code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("[ckpt] resumed from"), std::string::npos) << resumed.output;
  // It names the data it trains on: the one the fresh run built, by checksum.
  const std::string built = ref.output.substr(ref.output.find("[data] dataset "), 60);
  EXPECT_NE(resumed.output.find(built.substr(0, built.find(':'))), std::string::npos) << resumed.output;
  EXPECT_NE(resumed.output.find("pinned by step_00000"), std::string::npos) << resumed.output;
  // The pinned dataset is opened as it is: nothing curated or tokenized again.
  EXPECT_EQ(resumed.output.find("[curate]"), std::string::npos) << resumed.output;
  EXPECT_EQ(resumed.output.find("tokenizer ..."), std::string::npos) << resumed.output;
  EXPECT_TRUE(read_file(ckpt(run, 24) + "/model.safetensors") ==
              read_file(dir / straight + "/ckpt/step_0000024/model.safetensors"))
      << "the resumed run's weights differ from the uninterrupted run's";
  EXPECT_EQ(metric_steps(run), one_to(24));
  EXPECT_EQ(nlohmann::json::parse(read_file(ckpt(run, 24) + "/manifest.json"))["data"],
            nlohmann::json::parse(read_file(dir / straight + "/ckpt/step_0000024/manifest.json"))["data"]);

  // --resume of the finished run: nothing trained, nothing rewritten.
  struct stat before {}, after {};
  ASSERT_EQ(::stat((run + "/report.html").c_str(), &before), 0);
  const std::string metrics_before = read_file(run + "/metrics.jsonl");
  auto again = run_crucible({"train", "--resume", "--run-dir", killed}, dir.path());
  EXPECT_EQ(again.code, 0) << again.output;
  EXPECT_NE(again.output.find("has finished: step 24 of train.steps = 24"), std::string::npos)
      << again.output;
  EXPECT_EQ(again.output.find("validation loss"), std::string::npos) << again.output;
  ASSERT_EQ(::stat((run + "/report.html").c_str(), &after), 0);
  EXPECT_EQ(before.st_mtim.tv_nsec, after.st_mtim.tv_nsec);
  EXPECT_EQ(before.st_mtim.tv_sec, after.st_mtim.tv_sec);
  EXPECT_EQ(read_file(run + "/metrics.jsonl"), metrics_before);
}

// SIGKILL right after a checkpoint is on disk, before that step's metrics row
// is written (fault.inject kill_after_ckpt: the window a real crash may hit,
// made certain), at the final checkpoint and a middle one; then a SIGKILL as
// soon as a checkpoint directory appears, as a user's would come. The resumed
// run's metrics.jsonl has every step exactly once.
TEST(ResumeDefault, SigkillRightAfterACheckpointLosesNoMetricsRow) {
  TempDir dir("resume_default_ckpt_kill");
  for (int at : {6, 3}) {
    SCOPED_TRACE("killed right after the checkpoint of step " + std::to_string(at));
    const std::string name = "runs/k" + std::to_string(at), run = dir / name;
    auto killed = run_crucible(
        default_train(name, 6, 3, {"--set", "fault.inject=[\"kill_after_ckpt@" + std::to_string(at) + "\"]"}),
        dir.path());
    ASSERT_EQ(killed.code, 128 + SIGKILL) << killed.output;
    EXPECT_EQ(metric_steps(run), one_to(at - 1)) << "the kill came before the row was written";
    auto resumed = run_crucible({"train", "--resume", "--run-dir", name, "--set", "fault.inject=[]"},
                                dir.path());
    ASSERT_EQ(resumed.code, 0) << resumed.output;
    EXPECT_EQ(metric_steps(run), one_to(6)) << read_file(run + "/metrics.jsonl");
  }
  for (int trial = 0; trial < 2; ++trial) {
    const std::string name = "runs/t" + std::to_string(trial), run = dir / name;
    kill_when(dir, default_train(name, 6, 3), [&] { return fs::exists(ckpt(run, 3)); }, dir / "t.log");
    auto resumed = run_crucible({"train", "--resume", "--run-dir", name}, dir.path());
    ASSERT_EQ(resumed.code, 0) << resumed.output;
    EXPECT_EQ(metric_steps(run), one_to(6)) << read_file(run + "/metrics.jsonl");
  }
}

// What the checkpoint pins is checked: another dataset, another tokenizer,
// another model shape are each refused with one line naming both sides.
TEST(ResumeDefault, ACheckpointRefusesOtherDataTokenizerAndModelShape) {
  TempDir dir("resume_default_pins");
  const std::string name = "runs/pinned", run = dir / name;
  auto first = run_crucible(default_train(name, 8, 4, {"--stop-at", "4"}), dir.path());
  ASSERT_EQ(first.code, 0) << first.output;
  // Another dataset: its own tokenizer and shards.
  fs::create_directories(dir / "other_corpus");
  fs::copy_file("/usr/share/games/fortunes/computers", dir / "other_corpus/computers");
  auto other = run_crucible({"tokenize", "other_corpus", "-o", "other", "--vocab-size", "400"}, dir.path());
  ASSERT_EQ(other.code, 0) << other.output;

  auto wrong_data = run_crucible({"train", "--resume", "--run-dir", name, "--set", "data.dataset=other"},
                                 dir.path());
  EXPECT_EQ(wrong_data.code, 2) << wrong_data.output;
  EXPECT_NE(wrong_data.output.find("step_0000004 was trained on data/curated-"), std::string::npos)
      << wrong_data.output;
  EXPECT_NE(wrong_data.output.find("this run opens other"), std::string::npos) << wrong_data.output;
  EXPECT_EQ(metric_steps(run), one_to(4));  // nothing trained through

  auto wrong_shape = run_crucible({"train", "--resume", "--run-dir", name, "--set", "model.n_layer=8"},
                                  dir.path());
  EXPECT_EQ(wrong_shape.code, 2) << wrong_shape.output;
  EXPECT_NE(wrong_shape.output.find("model.n_layer: this run asks for 8, step_0000004 was trained with 4"),
            std::string::npos)
      << wrong_shape.output;

  const std::string own = read_file(run + "/tokenizer.model");
  testutil::write_file(run + "/tokenizer.model", read_file(dir / "other/tokenizer.model"));
  auto wrong_tok = run_crucible({"generate", name, "--tokens", "4"}, dir.path());
  EXPECT_EQ(wrong_tok.code, 2) << wrong_tok.output;
  EXPECT_NE(wrong_tok.output.find("tokenizer.model is not the tokenizer step_0000004 was trained with"),
            std::string::npos)
      << wrong_tok.output;
  testutil::write_file(run + "/tokenizer.model", own);
  auto sample = run_crucible({"generate", name, "--tokens", "4"}, dir.path());
  EXPECT_EQ(sample.code, 0) << sample.output;

  // The right resume still works and finishes the run.
  auto resumed = run_crucible({"train", "--resume", "--run-dir", name}, dir.path());
  ASSERT_EQ(resumed.code, 0) << resumed.output;
  EXPECT_EQ(metric_steps(run), one_to(8));
}

// Under `crucible launch -n 2` with rank 1 killed mid-run: the supervisor's
// restart resumes the same run on the pinned data, bit-identical to an
// uninterrupted 2-rank job.
// Under `crucible launch`, data parallel, pipeline parallel (two stages,
// the micro-batches of the same global batch) and tensor parallel (both
// ranks share every layer): a rank killed mid-run, the job
// restarts from its checkpoint by itself and ends with the uninterrupted
// job's weights, byte for byte.
void expect_restart_is_the_same_run(const std::string& label, const std::vector<std::string>& layout) {
  TempDir dir("resume_default_launch_" + label);
  ::setenv("ASAN_OPTIONS", "detect_leaks=0", 1);  // Open MPI's own leaks (dist_train_test.cc)
  auto launch = [&](const std::string& name, std::vector<std::string> more) {
    std::vector<std::string> a = {"launch", "-n", "2", "--threads", "1", "--"};
    more.insert(more.end(), layout.begin(), layout.end());
    auto t = default_train(name, 16, 4, more);
    a.insert(a.end(), t.begin(), t.end());
    return run_crucible(a, dir.path());
  };
  auto ref = launch("runs/ref", {});
  ASSERT_EQ(ref.code, 0) << ref.output;
  std::mt19937 rng(unsigned(testing::test_seed()));
  const int kill_at = 6 + int(rng() % 8);  // after the checkpoint of step 4
  SCOPED_TRACE(label + ": rank 1 killed at step " + std::to_string(kill_at));
  auto faulty = launch("runs/faulty",
                       {"--set", "fault.inject=[\"kill@" + std::to_string(kill_at) +
                                     ":rank=1\", \"slow@1:ms=100:attempt=all\"]"});
  ASSERT_EQ(faulty.code, 0) << faulty.output;
  EXPECT_NE(faulty.output.find("restart"), std::string::npos) << faulty.output;
  // Curated and tokenized by the first attempt only.
  EXPECT_EQ(count_of(faulty.output, "[curate] 15217 documents"), 1u) << faulty.output;
  // Exported, as a sharded checkpoint (pp, tp) has no single weights file.
  const std::string got = read_file(export_weights(dir / "runs/faulty", 16));
  EXPECT_FALSE(got.empty());
  EXPECT_TRUE(got == read_file(export_weights(dir / "runs/ref", 16)))
      << "the restarted job's weights differ from the uninterrupted job's";
  EXPECT_EQ(metric_steps(dir / "runs/faulty"), one_to(16));
}

TEST(ResumeDefault, LaunchRestartAfterAKilledRankIsTheSameRun) { expect_restart_is_the_same_run("dp", {}); }

TEST(ResumeDefault, PipelineRestartAfterAKilledStageIsTheSameRun) {
  expect_restart_is_the_same_run(
      "pp", {"--set", "dist.pp=2", "--set", "train.grad_accum=2", "--set", "train.batch_size=4"});
}

TEST(ResumeDefault, TensorParallelRestartAfterAKilledRankIsTheSameRun) {
  expect_restart_is_the_same_run("tp", {"--set", "dist.tp=2", "--set", "train.batch_size=4"});
}

// bf16 with full recomputation, the fused head, ZeRO-1 and bf16 gradients
// on the wire (the least-memory configuration): the restart rebuilds the
// bf16 working copy from the checkpoint's f32 master weights, and each
// rank's moments from its own shard's file.
TEST(ResumeDefault, Bf16RestartAfterAKilledRankIsTheSameRun) {
  expect_restart_is_the_same_run("bf16", {"--set", "train.precision=bf16", "--set", "train.recompute=full",
                                          "--set", "train.fused_head=true", "--set", "dist.zero=1", "--set",
                                          "dist.grad_dtype=bf16"});
}

}  // namespace
}  // namespace crucible::e2e
