// Sharded checkpoints (pipeline and tensor parallelism, ZeRO) under faults,
// as a user meets them: a part's file corrupted after publishing, a part's
// or a ZeRO shard's write failing mid-save, and `crucible export` given what
// it cannot use. Nothing
// is lost: the run falls back to the newest valid checkpoint and ends with
// the uninterrupted run's weights.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <utility>

#include "support/cli_runner.h"
#include "support/train_config.h"

namespace crucible::e2e {
namespace {

namespace fs = std::filesystem;

std::string make_config(const TempDir& dir) {
  testutil::SmallRun run;  // 12 steps
  run.batch = 2;
  run.accum = 2;
  run.ckpt_every = 4;
  run.keep = 3;
  run.name = "sharded";
  run.sample_tokens = 0;
  run.extra = "[fault]\nrestart_backoff_s = 0.1\n";
  return testutil::write_small_config(dir, run);
}

std::vector<std::string> launch(const std::string& cfg, const std::string& run, std::vector<std::string> sets) {
  ::setenv("ASAN_OPTIONS", "detect_leaks=0", 1);
  std::vector<std::string> a = {"launch", "-n", "2", "--threads", "1", "--", "train", cfg, "--run-dir", run};
  for (const std::string& s : sets) a.insert(a.end(), {"--set", s});
  return a;
}

// A part's file of the newest checkpoint corrupted after it was published:
// export and resume skip that checkpoint, naming the file; `--step` of it is
// refused; the resumed run retrains from the one before and ends with the
// uninterrupted run's weights.
TEST(ShardedCheckpoint, ACorruptPartFileFallsBackToTheCheckpointBefore) {
  TempDir dir("sharded_corrupt");
  const std::string cfg = make_config(dir);
  const std::string ref = dir / "ref", run = dir / "run";
  ASSERT_EQ(run_crucible(launch(cfg, ref, {"dist.tp=2"})).code, 0);
  auto first = run_crucible(
      launch(cfg, run, {"dist.tp=2", "fault.inject=[\"ckpt_corrupt@12:file=model.part-1.safetensors\"]"}));
  ASSERT_EQ(first.code, 0) << first.output;
  auto bad = run_crucible({"export", run, "--step", "12", "-o", dir / "x.safetensors"});
  EXPECT_EQ(bad.code, 2) << bad.output;
  EXPECT_NE(bad.output.find("step_0000012/model.part-1.safetensors: checksum mismatch"), std::string::npos)
      << bad.output;
  EXPECT_FALSE(fs::exists(dir / "x.safetensors"));
  auto fallback = run_crucible({"export", run, "-o", dir / "y.safetensors"});
  EXPECT_EQ(fallback.code, 0) << fallback.output;
  EXPECT_NE(fallback.output.find("step 8"), std::string::npos) << fallback.output;
  EXPECT_NE(fallback.output.find("model.part-1.safetensors: checksum mismatch"), std::string::npos)
      << "the skipped checkpoint is named\n" << fallback.output;
  auto resumed = run_crucible(launch(cfg, run, {"dist.tp=2", "train.steps=12"}));
  ASSERT_EQ(resumed.code, 0) << resumed.output;
  EXPECT_TRUE(read_file(export_weights(run, 12)) == read_file(export_weights(ref, 12)))
      << "the resumed run's weights differ from the uninterrupted run's";
}

// One writer's write fails half-way (a full disk on rank 1: a pipeline
// stage's part at pp = 2, a ZeRO shard of the moments at dp = 2): the save
// fails for the whole job, nothing half-written is published, and the job
// restarts from the checkpoint before and finishes with the same weights.
TEST(ShardedCheckpoint, AWritersFailedWriteIsRetriedFromTheCheckpointBefore) {
  TempDir dir("sharded_write_error");
  const std::string cfg = make_config(dir);
  for (const auto& [layout, file] : {std::pair<std::string, std::string>{"dist.pp=2", "optimizer.part-1.safetensors"},
                                     {"dist.zero=1", "optimizer.dp-1.safetensors"}}) {
    const std::string ref = dir / ("ref_" + file), run = dir / ("run_" + file);
    ASSERT_EQ(run_crucible(launch(cfg, ref, {layout})).code, 0);
    auto r = run_crucible(launch(cfg, run, {layout, "fault.inject=[\"ckpt_write_error@8:rank=1\"]"}));
    ASSERT_EQ(r.code, 0) << r.output;
    EXPECT_NE(r.output.find(file + ": injected write error"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("restart"), std::string::npos) << r.output;
    for (const auto& e : fs::directory_iterator(run + "/ckpt"))
      EXPECT_FALSE(e.path().string().ends_with(".tmp")) << e.path() << " left behind";
    EXPECT_TRUE(read_file(export_weights(run, 12)) == read_file(export_weights(ref, 12)))
        << layout << ": the restarted job's weights differ from the uninterrupted job's";
  }
}

TEST(ShardedCheckpoint, ExportRefusesWhatItCannotUse) {
  TempDir dir("export_bad");
  const std::string cfg = make_config(dir);
  const std::string run = dir / "run";
  ASSERT_EQ(run_crucible(launch(cfg, run, {"dist.tp=2", "train.steps=4"})).code, 0);
  auto no_step = run_crucible({"export", run, "--step", "3"});
  EXPECT_EQ(no_step.code, 2);
  EXPECT_NE(no_step.output.find("[export] --step 3: " + run + " has no checkpoint of that step"), std::string::npos)
      << no_step.output;
  auto no_run = run_crucible({"export", dir / "nothing"});
  EXPECT_EQ(no_run.code, 2) << no_run.output;
  auto bad_out = run_crucible({"export", run, "-o", dir / "no/such/dir/w.safetensors"});
  EXPECT_NE(bad_out.code, 0);
  EXPECT_NE(bad_out.output.find("no/such/dir"), std::string::npos) << bad_out.output;
  // The consolidated file of an unsharded run's checkpoint is its model.safetensors, byte for byte.
  const std::string one = dir / "one";
  ASSERT_EQ(run_crucible({"train", cfg, "--run-dir", one, "--set", "train.steps=4"}).code, 0);
  EXPECT_TRUE(read_file(export_weights(one, 4)) == read_file(one + "/ckpt/step_0000004/model.safetensors"));
}

}  // namespace
}  // namespace crucible::e2e
