// Fine-tuning end to end (`crucible train CONFIG --set init.from=SOURCE`, real
// processes): from a crucible run and from a Hugging Face directory (written
// without Python, tests/support/hf_dir.h) on a new corpus of generated
// sentences, through curation and the source's tokenizer. The validation loss
// before the first step (metrics.jsonl's step 0) falls by the last, the
// report shows both, the checkpoints record the source; a kill or --stop-at
// resumes bit-identically; every bad source is one line, exit 2, no run dir.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <cstdlib>
#include <random>

#include "support/cli_runner.h"
#include "support/hf_dir.h"
#include "support/train_config.h"
#include "support/weights.h"

namespace crucible::e2e {
namespace {

namespace fs = std::filesystem;

// dir/new/sentences.jsonl: sentences of a small grammar, nothing like fortunes.
std::string write_sentences(const TempDir& dir) {
  const char* subj[] = {"the red fox", "a small robot", "my neighbour", "the old sailor", "every child"};
  const char* verb[] = {"repairs", "paints", "counts", "carries", "measures", "builds"};
  const char* obj[] = {"a wooden boat", "the blue fence", "seven apples", "the long bridge", "a copper kettle"};
  const char* when[] = {"every morning", "on sunday", "before dinner", "in the rain", "after school"};
  std::mt19937 rng(3);
  auto pick = [&](const auto& words) { return std::string(words[rng() % std::size(words)]); };
  std::string jsonl;
  for (int doc = 0; doc < 400; ++doc) {
    std::string text;
    for (int s = 0; s < 3; ++s) {
      std::string sentence = pick(subj) + " " + pick(verb) + " " + pick(obj) + " " + pick(when) + ". ";
      sentence[0] = char(std::toupper(sentence[0]));
      text += sentence;
    }
    jsonl += nlohmann::json{{"text", text}}.dump() + "\n";
  }
  fs::create_directories(dir / "new");
  write_file(dir / "new/sentences.jsonl", jsonl);
  return dir / "new";
}

// The fine-tuning command: the small config (whose [model] is not the
// source's: the source's shape wins), the new corpus, curated.
std::vector<std::string> finetune(const std::string& cfg, const std::string& from, const std::string& corpus,
                                  const std::string& run, std::vector<std::string> more = {}) {
  std::vector<std::string> args = {"train", cfg, "--run-dir", run, "--set", "init.from=" + from, "--set",
                                   "data.source=[\"" + corpus + "\"]", "--set", "data.format=jsonl", "--set",
                                   "curate.enabled=true", "--set", "curate.profile=short", "--set", "optim.lr=1e-3",
                                   "--set", "train.steps=12"};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

std::string small_config(const TempDir& dir) {
  return testutil::write_small_config(dir, testutil::short_run());
}

struct Losses {
  double before = -1, after = -1;
};

// metrics.jsonl's step-0 row (the loss before training) and its last validation loss.
Losses val_losses(const std::string& run) {
  Losses l;
  auto rows = metric_rows(run + "/metrics.jsonl");
  EXPECT_FALSE(rows.empty());
  if (rows.empty()) return l;
  EXPECT_EQ(rows.front()["step"], 0);
  l.before = rows.front().value("val_loss", -1.0);
  for (const auto& r : rows)
    if (r["step"].get<int>() > 0 && r.contains("val_loss")) l.after = r["val_loss"].get<double>();
  return l;
}

nlohmann::json manifest(const std::string& run, const std::string& step) {
  return nlohmann::json::parse(read_file(run + "/ckpt/" + step + "/manifest.json"));
}

void expect_refused(const CliResult& r, const std::string& needle, const std::string& run) {
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find(needle), std::string::npos) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  EXPECT_FALSE(fs::exists(run)) << r.output;
}

TEST(FineTune, FromARunLowersValidationLossAndReportsIt) {
  TempDir dir("ft_run");
  const std::string cfg = small_config(dir);
  auto base = run_crucible({"train", cfg, "--run-dir", dir / "base"});
  ASSERT_EQ(base.code, 0) << base.output;
  auto ft = run_crucible(finetune(cfg, dir / "base", write_sentences(dir), dir / "ft"));
  ASSERT_EQ(ft.code, 0) << ft.output;
  EXPECT_NE(ft.output.find("[data] tokenizing with the tokenizer of " + dir / "base"), std::string::npos)
      << ft.output;
  EXPECT_NE(ft.output.find("[curate]"), std::string::npos) << ft.output;
  const Losses l = val_losses(dir / "ft");
  EXPECT_GT(l.before, 0);
  EXPECT_LT(l.after, l.before);
  std::printf("[ fine-tune from a run: val loss %.4f -> %.4f ]\n", l.before, l.after);
  char line[256];
  std::snprintf(line, sizeof line, "fine-tuned from %s: val loss %.4f -&gt; %.4f", (dir / "base").c_str(),
                l.before, l.after);
  EXPECT_NE(read_file(dir / "ft/report.html").find(line), std::string::npos) << line;
  EXPECT_NE(ft.output.find("fine-tuned from " + dir / "base" + ": validation loss"), std::string::npos)
      << ft.output;
  // The checkpoint records its origin: the source's checkpoint and its checksum.
  const auto m = manifest(dir / "ft", "step_0000012");
  const auto src = manifest(dir / "base", "step_0000008");
  EXPECT_EQ(m["init"]["from"], dir / "base");
  EXPECT_EQ(m["init"]["kind"], "run");
  EXPECT_EQ(m["init"]["checkpoint"], "step_0000008");
  EXPECT_EQ(m["init"]["fingerprint"], src["manifest_xxh64"]);
  EXPECT_EQ(m["init"]["val_loss_before"].get<double>(), l.before);
  // The source's shape, and its tokenizer in the run.
  EXPECT_EQ(m["config"]["model"], src["config"]["model"]);
  EXPECT_TRUE(fs::exists(dir / "ft/tokenizer.model"));
}

// From the HF directory itself and from its import: the same weights, the
// same tokenizer, the same data: the same fine-tuned weights, bit for bit.
TEST(FineTune, FromAHuggingFaceDirectoryAndItsImportAlike) {
  TempDir dir("ft_hf");
  const std::string cfg = small_config(dir), corpus = write_sentences(dir);
  ASSERT_NO_FATAL_FAILURE(testutil::write_tiny_hf_dir(dir / "hf"));
  auto imp = run_crucible({"import", dir / "hf", "-o", dir / "imported"});
  ASSERT_EQ(imp.code, 0) << imp.output;
  auto a = run_crucible(finetune(cfg, dir / "hf", corpus, dir / "a"));
  ASSERT_EQ(a.code, 0) << a.output;
  auto b = run_crucible(finetune(cfg, dir / "imported", corpus, dir / "b"));
  ASSERT_EQ(b.code, 0) << b.output;
  const Losses l = val_losses(dir / "a");
  EXPECT_LT(l.after, l.before);
  std::printf("[ fine-tune from an HF directory: val loss %.4f -> %.4f ]\n", l.before, l.after);
  EXPECT_EQ(val_losses(dir / "b").before, l.before);
  EXPECT_EQ(read_file(dir / "a/ckpt/step_0000012/model.safetensors"),
            read_file(dir / "b/ckpt/step_0000012/model.safetensors"));
  const auto m = manifest(dir / "a", "step_0000012");
  EXPECT_EQ(m["init"]["kind"], "huggingface");
  EXPECT_EQ(m["config"]["model"]["vocab_size"], testutil::kTinyHfModel.vocab_size);
  EXPECT_EQ(m["config"]["model"]["seq_len"], testutil::kTinyHfModel.seq_len);
  EXPECT_EQ(m["config"]["data"]["vocab_size"], 257);
  for (const char* f : {"vocab.json", "merges.txt"}) EXPECT_TRUE(fs::exists(dir / "a/" + f)) << f;
}

// Stopped (--stop-at) or killed (SIGKILL as the checkpoint of step 4 reaches
// the disk, before its metrics row), then
// the same command with --resume: the final weights of an uninterrupted
// fine-tune, bit for bit; the source is not read again (it is gone by then).
TEST(FineTune, ResumesBitIdenticallyAfterAStopOrAKill) {
  TempDir dir("ft_resume");
  const std::string cfg = small_config(dir), corpus = write_sentences(dir);
  ASSERT_NO_FATAL_FAILURE(testutil::write_tiny_hf_dir(dir / "hf"));
  auto straight = run_crucible(finetune(cfg, dir / "hf", corpus, dir / "straight"));
  ASSERT_EQ(straight.code, 0) << straight.output;

  auto stopped = run_crucible(finetune(cfg, dir / "hf", corpus, dir / "stopped", {"--stop-at", "4"}));
  ASSERT_EQ(stopped.code, 0) << stopped.output;
  auto killed =
      run_crucible(finetune(cfg, dir / "hf", corpus, dir / "killed", {"--set", "fault.inject=[\"kill_after_ckpt@4\"]"}));
  ASSERT_EQ(killed.code, 128 + 9) << killed.output;
  ASSERT_TRUE(fs::exists(dir / "killed/ckpt/step_0000004"));
  fs::rename(dir / "hf", dir / "hf.gone");

  // Another source is refused naming the key, and changes nothing.
  auto other = run_crucible({"train", "--resume", "--run-dir", dir / "stopped", "--set", "init.from=" + dir / "x"});
  EXPECT_EQ(other.code, 2) << other.output;
  EXPECT_NE(other.output.find("[config] init.from: this run asks for"), std::string::npos) << other.output;
  EXPECT_EQ(read_file(dir / "stopped/ckpt/latest"), "step_0000004\n");

  auto resumed = run_crucible(finetune(cfg, dir / "hf", corpus, dir / "stopped", {"--resume"}));
  ASSERT_EQ(resumed.code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resumed from"), std::string::npos) << resumed.output;
  auto after_kill = run_crucible({"train", "--resume", "--run-dir", dir / "killed", "--set", "fault.inject=[]"});
  ASSERT_EQ(after_kill.code, 0) << after_kill.output;

  const std::string want = read_file(dir / "straight/ckpt/step_0000012/model.safetensors");
  ASSERT_FALSE(want.empty());
  EXPECT_TRUE(read_file(dir / "stopped/ckpt/step_0000012/model.safetensors") == want);
  EXPECT_TRUE(read_file(dir / "killed/ckpt/step_0000012/model.safetensors") == want);
  // Each keeps the loss before fine-tuning as its first row, once.
  for (const char* run : {"stopped", "killed"}) {
    EXPECT_EQ(val_losses(dir / run).before, val_losses(dir / "straight").before) << run;
    EXPECT_EQ(metric_steps(dir / run).size(), 13u) << run;
  }
}

// `crucible launch -n 2`: every rank loads the source's weights. Data
// parallel in reproducible mode gives the single process's bits (the same
// micro-batch, half the accumulation); tensor parallel from a run's
// checkpoint loads each rank's shard and trains to the same weights within
// float rounding.
TEST(FineTune, TwoRanksLoadTheSameWeights) {
  TempDir dir("ft_ranks");
  const std::string cfg = small_config(dir), corpus = write_sentences(dir);
  ASSERT_NO_FATAL_FAILURE(testutil::write_tiny_hf_dir(dir / "hf"));
  const std::vector<std::string> repro = {"--set", "dist.reproducible=true"};
  auto one = run_crucible(finetune(cfg, dir / "hf", corpus, dir / "one", repro));
  ASSERT_EQ(one.code, 0) << one.output;
  ::setenv("ASAN_OPTIONS", "detect_leaks=0", 1);  // Open MPI's components (see dist_train_test.cc)
  auto launch = [&](const std::string& from, const std::string& run, std::vector<std::string> more) {
    std::vector<std::string> args = {"launch", "-n", "2", "--threads", "1", "--"};
    for (const std::string& a : finetune(cfg, from, corpus, run, std::move(more))) args.push_back(a);
    return run_crucible(args);
  };
  auto dp = launch(dir / "hf", dir / "dp", {"--set", "dist.reproducible=true", "--set", "train.grad_accum=1"});
  ASSERT_EQ(dp.code, 0) << dp.output;
  EXPECT_EQ(val_losses(dir / "dp").before, val_losses(dir / "one").before);
  EXPECT_TRUE(read_file(dir / "dp/ckpt/step_0000012/model.safetensors") ==
              read_file(dir / "one/ckpt/step_0000012/model.safetensors"));

  auto tp = launch(dir / "one", dir / "tp", {"--set", "dist.tp=2", "--set", "train.steps=4"});
  ASSERT_EQ(tp.code, 0) << tp.output;
  auto same = run_crucible(finetune(cfg, dir / "one", corpus, dir / "tp_ref", {"--set", "train.steps=4"}));
  ASSERT_EQ(same.code, 0) << same.output;
  EXPECT_NEAR(val_losses(dir / "tp").before, val_losses(dir / "tp_ref").before, 1e-5);
  EXPECT_LE(testutil::weight_difference(export_weights(dir / "tp", 4), dir / "tp_ref/ckpt/step_0000004/model.safetensors"),
            1e-4);
}

TEST(FineTune, BadSourcesAreOneLineAndLeaveNothing) {
  TempDir dir("ft_bad");
  const std::string cfg = small_config(dir), corpus = write_sentences(dir);
  const std::string run = dir / "run";
  auto try_from = [&](const std::string& from, std::vector<std::string> more = {}) {
    return run_crucible(finetune(cfg, from, corpus, run, std::move(more)));
  };
  expect_refused(try_from(dir / "absent"), "[init] init.from " + dir / "absent" + ": no such directory", run);
  write_file(dir / "file", "x");
  expect_refused(try_from(dir / "file"), ": not a directory", run);
  fs::create_directories(dir / "empty");
  expect_refused(try_from(dir / "empty"), ": neither a crucible run", run);
  fs::create_directories(dir / "no_ckpt/ckpt");
  write_file(dir / "no_ckpt/config.toml", "");
  expect_refused(try_from(dir / "no_ckpt"), "[init] init.from " + dir / "no_ckpt" + ": no checkpoint in", run);

  ASSERT_NO_FATAL_FAILURE(testutil::write_tiny_hf_dir(dir / "llama"));
  auto j = nlohmann::json::parse(read_file(dir / "llama/config.json"));
  j["model_type"] = "llama";
  write_file(dir / "llama/config.json", j.dump());
  expect_refused(try_from(dir / "llama"), "model_type 'llama' is not supported", run);

  // A tokenizer of 257 tokens for a model of 200.
  nn::GPTConfig narrow = testutil::kTinyHfModel;
  narrow.vocab_size = 200;
  ASSERT_NO_FATAL_FAILURE(testutil::write_tiny_hf_dir(dir / "narrow", narrow));
  expect_refused(try_from(dir / "narrow"), "257 tokens, more than config.json's vocab_size 200", run);

  // The source's shape is the model's: a --set of another is refused.
  ASSERT_NO_FATAL_FAILURE(testutil::write_tiny_hf_dir(dir / "hf"));
  expect_refused(try_from(dir / "hf", {"--set", "model.n_layer=3"}), "[config] model.n_layer: --set gives 3", run);
  expect_refused(try_from(dir / "hf", {"--set", "dist.tp=2"}), "[config] init.from: ", run);
  // A prepared dataset of another tokenizer.
  auto ds = run_crucible({"tokenize", corpus, "-o", dir / "ds", "--vocab-size", "300", "--format", "jsonl"});
  ASSERT_EQ(ds.code, 0) << ds.output;
  expect_refused(try_from(dir / "hf", {"--set", "data.dataset=" + dir / "ds"}),
                 "[init] data.dataset " + dir / "ds" + " was tokenized with", run);
}

}  // namespace
}  // namespace crucible::e2e
