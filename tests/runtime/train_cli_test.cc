// End-to-end tests of `crucible train` / `generate` / `tokenize`: the real
// binary on a real corpus (a slice of Debian's fortunes), with a model small
// enough that a whole run takes a few seconds.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "support/cli_runner.h"
#include "support/train_config.h"

namespace crucible::e2e {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A tiny model over one fortunes file; `dir` holds corpus/, data/ and cfg.toml.
std::string make_config(const TempDir& dir) { return testutil::write_small_config(dir, {}); }

std::vector<nlohmann::json> read_metrics(const std::string& run) {
  std::vector<nlohmann::json> rows;
  std::ifstream in(run + "/metrics.jsonl");
  for (std::string line; std::getline(in, line);) rows.push_back(nlohmann::json::parse(line));
  return rows;
}

std::vector<std::string> tmp_dirs(const std::string& ckpt) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(ckpt))
    if (e.path().filename().string().find(".tmp") != std::string::npos)
      out.push_back(e.path().string());
  return out;
}

TEST(TrainCli, ResumeIsBitExact) {
  TempDir dir("resume");
  std::string cfg = make_config(dir);
  auto straight = run_crucible({"train", cfg, "--run-dir", dir / "a"});
  ASSERT_EQ(straight.code, 0) << straight.output;
  auto first = run_crucible({"train", cfg, "--run-dir", dir / "b", "--stop-at", "5"});
  ASSERT_EQ(first.code, 0) << first.output;
  EXPECT_NE(first.output.find("--stop-at reached"), std::string::npos) << first.output;
  EXPECT_TRUE(fs::exists(dir / "b/ckpt/step_0000005/manifest.json"));
  EXPECT_FALSE(fs::exists(dir / "b/ckpt/step_0000008"));
  // A resume at another global batch is refused naming the change, and
  // touches nothing: the resume after it is still bit-exact.
  auto other_batch =
      run_crucible({"train", "--resume", "--run-dir", dir / "b", "--set", "train.grad_accum=3"});
  EXPECT_EQ(other_batch.code, 2) << other_batch.output;
  EXPECT_NE(other_batch.output.find(" -> 3: the global batch would change from "),
            std::string::npos)
      << other_batch.output;
  EXPECT_EQ(read_file(dir / "b/ckpt/latest"), "step_0000005\n");
  // Without a config the run's own resolved config.toml is used.
  auto rest = run_crucible({"train", "--resume", "--run-dir", dir / "b"});
  ASSERT_EQ(rest.code, 0) << rest.output;
  EXPECT_NE(rest.output.find("resumed from"), std::string::npos) << rest.output;

  for (const char* f : {"model.safetensors", "optimizer.safetensors"}) {
    std::string a = read_file(dir / "a/ckpt/step_0000012/" + f);
    std::string b = read_file(dir / "b/ckpt/step_0000012/" + f);
    ASSERT_FALSE(a.empty()) << f;
    EXPECT_TRUE(a == b) << f << " differs between the straight and the resumed run";
  }
  auto ma = read_metrics(dir / "a"), mb = read_metrics(dir / "b");
  ASSERT_EQ(ma.size(), 12u);
  ASSERT_EQ(mb.size(), 12u);  // the resumed file has no duplicate steps
  for (size_t i = 0; i < ma.size(); ++i) {
    EXPECT_EQ(ma[i]["step"], int(i + 1));
    EXPECT_EQ(mb[i]["step"], int(i + 1));
    EXPECT_EQ(ma[i]["loss"].get<double>(), mb[i]["loss"].get<double>()) << "step " << i + 1;
    EXPECT_EQ(ma[i]["grad_norm"].get<double>(), mb[i]["grad_norm"].get<double>());
    EXPECT_EQ(ma[i].contains("val_loss"), mb[i].contains("val_loss"));
    if (ma[i].contains("val_loss")) {
      EXPECT_EQ(ma[i]["val_loss"], mb[i]["val_loss"]);
    }
  }
  // The metrics a user needs per step are there.
  for (const char* k : {"loss", "lr", "grad_norm", "tokens_per_s", "data_wait_ms", "forward_ms",
                        "backward_ms", "optimizer_ms", "step_ms", "mfu"})
    EXPECT_TRUE(ma[0].contains(k)) << k;
  EXPECT_TRUE(ma[3].contains("val_loss"));
  EXPECT_LT(ma[11]["loss"].get<double>(), ma[0]["loss"].get<double>());  // it learns
  EXPECT_TRUE(fs::exists(dir / "a/config.toml"));
  EXPECT_TRUE(fs::exists(dir / "a/log.txt"));
  EXPECT_EQ(read_file(dir / "a/ckpt/latest"), "step_0000012\n");
}

TEST(TrainCli, CorruptCheckpointFallsBackToThePreviousOne) {
  for (std::string damage : {"flip", "truncate"}) {
    TempDir dir("corrupt_" + damage);
    std::string cfg = make_config(dir);
    auto r = run_crucible({"train", cfg, "--run-dir", dir / "run", "--set", "train.steps=8"});
    ASSERT_EQ(r.code, 0) << r.output;
    std::string victim = dir / "run/ckpt/step_0000008/model.safetensors";
    std::string bytes = read_file(victim);
    ASSERT_GT(bytes.size(), 1000u);
    if (damage == "flip")
      bytes[bytes.size() / 2] ^= 0x10;
    else
      bytes.resize(bytes.size() - 100);
    write_file(victim, bytes);
    auto resumed =
        run_crucible({"train", "--resume", "--run-dir", dir / "run", "--set", "train.steps=10"});
    ASSERT_EQ(resumed.code, 0) << resumed.output;
    EXPECT_NE(resumed.output.find("step_0000008/model.safetensors"), std::string::npos)
        << resumed.output;
    EXPECT_NE(resumed.output.find("resumed from " + dir / "run/ckpt/step_0000004"),
              std::string::npos)
        << resumed.output;
    EXPECT_TRUE(fs::exists(dir / "run/ckpt/step_0000010/manifest.json"));
  }
}

TEST(TrainCli, FailedCheckpointWriteKeepsLatest) {
  TempDir dir("write_fault");
  std::string cfg = make_config(dir);
  auto r = run_crucible(
      {"train", cfg, "--run-dir", dir / "run", "--set", "fault.inject=ckpt_write_error@8"});
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("injected write error"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("latest still names step_0000004"), std::string::npos) << r.output;
  EXPECT_EQ(read_file(dir / "run/ckpt/latest"), "step_0000004\n");
  EXPECT_FALSE(fs::exists(dir / "run/ckpt/step_0000008"));
  // RUN/log.txt ends with why the run ended, as the terminal did.
  const std::string log = read_file(dir / "run/log.txt");
  const std::string last = log.substr(log.rfind('\n', log.size() - 2) + 1);
  EXPECT_NE(last.find("injected write error"), std::string::npos) << log;
  EXPECT_TRUE(tmp_dirs(dir / "run/ckpt").empty());
  // ... and the run continues from there (the resolved config keeps the
  // injected fault, so the resume switches it off).
  auto resumed =
      run_crucible({"train", "--resume", "--run-dir", dir / "run", "--set", "fault.inject=[]"});
  ASSERT_EQ(resumed.code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("step_0000004 at step 4"), std::string::npos) << resumed.output;
}

// Bad input found after the run directory is decided (a seq_len the corpus
// cannot fill; a diverged loss) ends RUN/log.txt with the message too, and a
// run that stopped before preparing its directory leaves none.
TEST(TrainCli, FatalMessagesReachTheLogAndEarlyFailuresLeaveNothing) {
  TempDir dir("fatal_log");
  std::string cfg = make_config(dir);
  auto diverged = run_crucible({"train", cfg, "--run-dir", dir / "run", "--set", "optim.lr=1e30", "--set",
                                "optim.grad_clip=0", "--set", "optim.warmup_steps=0"});
  EXPECT_NE(diverged.code, 0) << diverged.output;
  ASSERT_NE(diverged.output.find("diverged"), std::string::npos) << diverged.output;
  const std::string log = read_file(dir / "run/log.txt");
  EXPECT_NE(log.substr(log.rfind('\n', log.size() - 2) + 1).find("diverged"), std::string::npos) << log;
  auto missing = run_crucible({"train", cfg, "--run-dir", dir / "never", "--set", "data.source=nope"});
  EXPECT_EQ(missing.code, 2) << missing.output;
  EXPECT_FALSE(fs::exists(dir / "never")) << "a run stopped by bad input left its directory";
}

// dist.reproducible promises the same bits across world sizes at the same
// micro-batch and threads per rank; a resume that changes them is told so.
TEST(TrainCli, ReproducibleResumeWithAnotherMicroBatchIsWarned) {
  TempDir dir("repro_warn");
  std::string cfg = make_config(dir);
  auto first = run_crucible({"train", cfg, "--run-dir", dir / "run", "--set", "dist.reproducible=true",
                             "--stop-at", "4"});
  ASSERT_EQ(first.code, 0) << first.output;
  auto same = run_crucible({"train", "--resume", "--run-dir", dir / "run", "--stop-at", "8"});
  ASSERT_EQ(same.code, 0) << same.output;
  EXPECT_EQ(same.output.find("will not be bit-identical"), std::string::npos) << same.output;
  auto other = run_crucible({"train", "--resume", "--run-dir", dir / "run", "--set", "train.batch_size=2",
                             "--set", "train.grad_accum=4"});
  ASSERT_EQ(other.code, 0) << other.output;
  EXPECT_NE(other.output.find("trained at 4 sequences x 1 threads per rank, this run uses 2 x 1"),
            std::string::npos)
      << other.output;
}

// After training, a signal ends the samples at once (the run is saved), and
// during training a second signal of the other kind kills.
TEST(TrainCli, SignalsAreHeardDuringSamplingAndASecondOneKills) {
  TempDir dir("signals_sampling");
  std::string cfg = make_config(dir);
  {
    Background job({"train", cfg, "--run-dir", dir / "a", "--set", "run.sample_tokens=200000"}, dir.path(),
                   dir / "a.log");
    ASSERT_TRUE(poll_until([&] { return read_file(dir / "a.log").find("done in") != std::string::npos; }));
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_EQ(::kill(job.pid, SIGTERM), 0);
    const int code = job.wait();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_LT(s, 10.0) << read_file(dir / "a.log");
    EXPECT_EQ(code, 0) << read_file(dir / "a.log");
    EXPECT_NE(read_file(dir / "a.log").find("signal received: samples skipped"), std::string::npos)
        << read_file(dir / "a.log");
  }
  {
    Background job({"train", cfg, "--run-dir", dir / "b", "--set", "train.steps=100000", "--set",
                    "fault.inject=[\"slow@1:ms=500\"]"},
                   dir.path(), dir / "b.log");
    ASSERT_TRUE(poll_until([&] { return count_lines(dir / "b/metrics.jsonl") >= 1; }));
    ASSERT_EQ(::kill(job.pid, SIGTERM), 0);  // asks for a checkpoint at the next boundary...
    ASSERT_EQ(::kill(job.pid, SIGINT), 0);   // ...and the second signal does not wait for it
    const int code = job.wait();  // the kernel may deliver either one first
    EXPECT_TRUE(code == 128 + SIGINT || code == 128 + SIGTERM) << code << "\n" << read_file(dir / "b.log");
  }
}

TEST(TrainCli, SigtermCheckpointsAtTheStepBoundaryAndResumes) {
  TempDir dir("sigterm");
  std::string cfg = make_config(dir);
  const std::string run = dir / "run", log = dir / "out.txt";
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {  // the child: crucible train with far more steps than we wait for
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    std::string bin = std::string(CRUCIBLE_BINARY_DIR) + "/crucible";
    ::execl(bin.c_str(), bin.c_str(), "train", cfg.c_str(), "--run-dir", run.c_str(), "--set",
            "train.steps=1000000", (char*)nullptr);
    ::_exit(127);
  }
  // Training has started once three steps are recorded (polled: the signal
  // must arrive mid-run, and the run has no other way to tell us).
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (count_lines(run + "/metrics.jsonl") < 3 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_EQ(::kill(pid, SIGTERM), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << read_file(log);
  EXPECT_EQ(WEXITSTATUS(status), 3) << read_file(log);  // runtime::kExitPreempted
  // The checkpoint is of the last step recorded: no step was lost.
  const size_t steps = count_lines(run + "/metrics.jsonl");
  ASSERT_GE(steps, 3u);
  char name[32];
  std::snprintf(name, sizeof name, "step_%07zu\n", steps);
  EXPECT_EQ(read_file(run + "/ckpt/latest"), name) << read_file(log);
  EXPECT_NE(read_file(log).find("signal received"), std::string::npos) << read_file(log);
  auto resumed = run_crucible(
      {"train", "--resume", "--run-dir", run, "--set", "train.steps=" + std::to_string(steps + 2)});
  ASSERT_EQ(resumed.code, 0) << resumed.output;
  EXPECT_EQ(count_lines(run + "/metrics.jsonl"), steps + 2);
}

// Bad input: one line naming the problem, exit code 2, nothing written.
void expect_bad_input(const CliResult& r, const std::string& needle) {
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find(needle), std::string::npos) << r.output;
}

TEST(TrainCli, BadInputIsOneClearLine) {
  TempDir dir("bad_input");
  std::string cfg = make_config(dir);
  auto run = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = {"train", cfg, "--run-dir", dir / "run"};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_crucible(args);
  };
  expect_bad_input(run({"--set", "model.n_embd=33"}), "[config] model.n_embd: 33 is not divisible");
  expect_bad_input(run({"--set", "model.n_layers=3"}), "[config] model.n_layers: unknown key");
  expect_bad_input(run({"--set", "train.steps=many"}), "[config] train.steps:");
  expect_bad_input(run({"--set", "data.source=" + dir / "nope"}), "does not exist");
  fs::create_directories(dir / "empty");
  write_file(dir / "empty/f", "%\n \n%\n");
  expect_bad_input(run({"--set", "data.source=" + dir / "empty"}), "no documents");
  expect_bad_input(run_crucible({"train", dir / "missing.toml"}), "[config] cannot read");
  write_file(dir / "bad.toml", "[train]\nsteps = \"x\"\n");
  expect_bad_input(run_crucible({"train", dir / "bad.toml"}), "train.steps: expected an integer");
  expect_bad_input(run_crucible({"train", "--bogus-flag"}), "bogus");
  EXPECT_FALSE(fs::exists(dir / "run")) << "a failed start left a run directory behind";

  write_file(dir / "file", "x");  // a run directory that cannot be created
  expect_bad_input(run_crucible({"train", cfg, "--run-dir", dir / "file/run"}),
                   "file/run: Not a directory");
  // A finished run is not overwritten by accident.
  ASSERT_EQ(run({"--set", "train.steps=4"}).code, 0);
  expect_bad_input(run({}), "already holds a training run");
  expect_bad_input(run_crucible({"train", "--resume", "--run-dir", dir / "nothing"}),
                   "holds no checkpoint");
}

TEST(TrainCli, InvalidUtf8IsRepairedNotFatal) {
  TempDir dir("utf8");
  std::string cfg = make_config(dir);
  std::string text = read_file(dir / "corpus/computers");
  text.insert(100, "\xff\xfe broken \xc3 bytes \xed\xa0\x80 here\n");
  write_file(dir / "corpus/computers", text);
  auto r = run_crucible({"train", cfg, "--run-dir", dir / "run", "--set", "train.steps=2"});
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("invalid UTF-8"), std::string::npos) << r.output;
}

TEST(TrainCli, GenerateIsDeterministicPerSeed) {
  TempDir dir("generate");
  std::string cfg = make_config(dir);
  ASSERT_EQ(run_crucible({"train", cfg, "--run-dir", dir / "run"}).code, 0);
  auto a = run_crucible(
      {"generate", dir / "run", "--prompt", "The computer", "--tokens", "24", "--seed", "5"});
  auto b = run_crucible(
      {"generate", dir / "run", "--prompt", "The computer", "--tokens", "24", "--seed", "5"});
  ASSERT_EQ(a.code, 0) << a.output;
  EXPECT_EQ(a.output, b.output);
  EXPECT_NE(a.output.find("The computer"), std::string::npos);
  EXPECT_GT(a.output.size(), std::string("The computer").size() + 20);
  auto greedy = run_crucible({"generate", dir / "run", "--temperature", "0", "--tokens", "8"});
  EXPECT_EQ(greedy.code, 0) << greedy.output;
  expect_bad_input(run_crucible({"generate", dir / "nothing"}), "[config] cannot read");
}

TEST(TrainCli, TokenizeThenTrainOnTheDataset) {
  TempDir dir("tokenize");
  std::string cfg = make_config(dir);
  auto tok = run_crucible({"tokenize", dir / "corpus", "-o", dir / "ds", "--vocab-size", "512",
                           "--format", "fortunes"});
  ASSERT_EQ(tok.code, 0) << tok.output;
  for (const char* f : {"tokenizer.model", "train.tok", "val.tok", "dataset.json"})
    EXPECT_TRUE(fs::exists(dir / "ds/" + f)) << f;
  expect_bad_input(run_crucible({"tokenize", dir / "corpus", "-o", dir / "ds"}), "already exists");
  auto r = run_crucible({"train", cfg, "--run-dir", dir / "run", "--set", "train.steps=2", "--set",
                         "data.dataset=" + dir / "ds"});
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_FALSE(fs::exists(dir / "data")) << "data.dataset must be used instead of the cache";
  // Shards and tokenizer must belong together.
  ASSERT_EQ(
      run_crucible({"tokenize", dir / "corpus", "-o", dir / "ds2", "--vocab-size", "480"}).code, 0);
  fs::copy_file(dir / "ds2/tokenizer.model", dir / "ds/tokenizer.model",
                fs::copy_options::overwrite_existing);
  expect_bad_input(run_crucible({"train", cfg, "--run-dir", dir / "run2", "--set",
                                 "data.dataset=" + dir / "ds"}),
                   "was made by another tokenizer");
}

// The embedded default's path: curate.enabled curates data.source before the
// tokenizer sees it, says what it removed, and the run keeps the report.
TEST(TrainCli, CuratesTheCorpusFirstAndReportsWhatItRemoved) {
  TempDir dir("train_curate");
  testutil::SmallRun run;
  run.extra = "[curate]\nenabled = true\n";
  // A duplicated fortune and a junk one, added to the corpus.
  std::string cfg = write_small_config(dir, run);
  std::string junk = "Sell! Sell! Sell!\n%\n";
  std::string corpus = read_file(dir / "corpus/computers");
  std::string first = corpus.substr(0, corpus.find("\n%\n"));
  write_file(dir / "corpus/extra", first + "\n%\n" + "\t\t# # # # # # #\n%\n");
  auto r = run_crucible({"train", cfg, "--run-dir", dir / "run", "--set", "train.steps=2"});
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("[curate]   exact_dedup: -1 docs"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("[curate]   gopher_quality: -"), std::string::npos) << r.output;
  json cur = json::parse(read_file(dir / "run/curation.json"));
  EXPECT_EQ(cur["config"]["profile"], "short");
  EXPECT_LT(cur["output"]["docs"].get<int>(), cur["input"]["docs"].get<int>());
  // The dataset was built from the curated shards, and the report shows the section.
  bool curated = false;
  for (const auto& e : fs::directory_iterator(dir / "data"))
    curated |= e.path().filename().string().rfind("curated-", 0) == 0;
  EXPECT_TRUE(curated);
  std::string html = read_file(dir / "run/report.html");
  EXPECT_NE(html.find("<section id=\"curation\">"), std::string::npos);
  EXPECT_NE(html.find("exact_dedup.duplicate"), std::string::npos);
}

}  // namespace
}  // namespace crucible::e2e
