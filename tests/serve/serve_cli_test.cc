// `crucible serve` end to end, as users run it: a real server process on
// loopback and real HTTP clients (tests/serve/serve_client.py; Python's
// standard library, and the official `openai` client from the test venv,
// tests/hf/hf_venv.sh, "skipped" where that cannot be made):
//  - the openai client lists the model, completes and streams, and its
//    greedy tokens are `crucible generate --temperature 0`'s;
//  - 32 concurrent clients with mixed prompt and output lengths, greedy and
//    seeded sampling, streaming and not, get exactly the tokens each request
//    gets alone (continuous batching changes no result);
//  - a full queue answers 429 with Retry-After; a client that disconnects
//    mid-stream frees its slot and blocks at once (the metrics show it);
//  - SIGTERM under load: every accepted request completes, new ones get 503,
//    the server exits 0;
//  - each bad request class gets its 400 naming the field; bad invocations
//    exit 2 with one line.
#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "support/cli_runner.h"
#include "support/hf_venv.h"
#include "support/train_config.h"

namespace crucible {
namespace {

using e2e::Background;
using e2e::run_crucible;
using testutil::TempDir;

// A trained run shared by the suite: the small test config widened to the
// tiny workload's layers (4 x 256, so that a 300-token request takes long
// enough to be interrupted, disconnected or queued behind), with a context of
// 384 (room for the mixed prompts), 8 steps.
class ServeCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("serve_cli");
    testutil::SmallRun run = testutil::short_run();
    run.extra = "dir = \"" + *dir_ / "run" + "\"\n";
    const std::string cfg = testutil::write_small_config(*dir_, run);
    auto r = run_crucible({"train", cfg, "--set", "model.seq_len=384", "--set", "model.n_layer=4", "--set",
                           "model.n_head=4", "--set", "model.n_embd=256"});
    ASSERT_EQ(r.code, 0) << r.output;
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::string run_dir() { return *dir_ / "run"; }

  // `crucible serve RUN --port 0 EXTRA...` in the background; its port.
  struct Served {
    std::unique_ptr<Background> proc;
    int port = 0;
  };
  Served serve(const std::vector<std::string>& extra, const std::string& name) {
    std::vector<std::string> args = {"serve", run_dir(), "--port", "0", "--model-name", "m"};
    args.insert(args.end(), extra.begin(), extra.end());
    Served s;
    s.proc = std::make_unique<Background>(args, ".", *dir_ / (name + ".log"));
    const std::regex listening("listening on http://127\\.0\\.0\\.1:([0-9]+)");
    e2e::poll_until(
        [&] {
          std::smatch m;
          const std::string log = e2e::read_file(s.proc->log);
          if (std::regex_search(log, m, listening)) s.port = std::stoi(m[1]);
          return s.port > 0 || ::kill(s.proc->pid, 0) != 0;
        },
        60);
    EXPECT_GT(s.port, 0) << e2e::read_file(s.proc->log);
    return s;
  }
  // serve_client.py CMD PORT ARGS... with `python`; expects exit 0.
  static void client(const std::string& python, const std::string& cmd, int port,
                     const std::vector<std::string>& args = {"m"}) {
    std::vector<std::string> all = {cmd, std::to_string(port)};
    all.insert(all.end(), args.begin(), args.end());
    std::string out;
    const int rc = testutil::run_python(python, CRUCIBLE_SOURCE_DIR "/tests/serve/serve_client.py", all, &out);
    EXPECT_EQ(rc, 0) << out;
    std::cout << out;
  }
  // A server with `serve_args`, serve_client.py CMD against it, then SIGTERM.
  void serve_then(const std::string& python, const std::vector<std::string>& serve_args, const std::string& cmd) {
    Served s = serve(serve_args, cmd);
    client(python, cmd, s.port);
    stop(s);
  }
  static void stop(Served& s) {
    ::kill(s.proc->pid, SIGTERM);
    EXPECT_EQ(s.proc->wait_for(60), 0) << e2e::read_file(s.proc->log);
  }

  static TempDir* dir_;
};
TempDir* ServeCli::dir_ = nullptr;

const char* kPython = "/usr/bin/python3";

TEST_F(ServeCli, OpenAiClientCompletesAndStreamsLikeGenerate) {
  std::string why;
  const std::string py = testutil::hf_python(&why);
  if (py.empty()) GTEST_SKIP() << why;
  const std::string prompt = "The meaning of life is";
  auto g = run_crucible({"generate", run_dir(), "--prompt", prompt, "--temperature", "0", "--tokens",
                         "12", "--print-ids"});
  ASSERT_EQ(g.code, 0) << g.output;
  const size_t at = g.output.find("[generate] ids ");
  ASSERT_NE(at, std::string::npos) << g.output;
  auto ids = nlohmann::json::parse(g.output.substr(at + 15, g.output.find('\n', at) - at - 15));
  const nlohmann::json want = {{"prompt", prompt}, {"new", ids["new"]}};
  Served s = serve({"--precision", "fp32"}, "openai");  // generate's, the run's precision
  client(py, "openai", s.port, {"m", want.dump()});
  stop(s);
}

TEST_F(ServeCli, ConcurrentClientsGetTheirLoneTokens) { serve_then(kPython, {"--max-batch", "32"}, "concurrent"); }

TEST_F(ServeCli, FullQueueAnswers429) { serve_then(kPython, {"--max-batch", "1", "--max-queue", "1"}, "queue_full"); }

TEST_F(ServeCli, DisconnectFreesTheSlotAtOnce) { serve_then(kPython, {"--max-batch", "1"}, "disconnect"); }

TEST_F(ServeCli, SigtermDrainsEveryAcceptedRequest) {
  Served s = serve({"--max-batch", "4"}, "drain");
  client(kPython, "drain", s.port, {"m", std::to_string(s.proc->pid)});
  // The client sent the SIGTERM; had it failed first, wait_for kills the
  // server after 60 s and fails rather than hanging.
  EXPECT_EQ(s.proc->wait_for(60), 0) << e2e::read_file(s.proc->log);
  EXPECT_NE(e2e::read_file(s.proc->log).find("drained"), std::string::npos);
}

TEST_F(ServeCli, BadRequestsGet400NamingTheField) { serve_then(kPython, {}, "bad_requests"); }

TEST_F(ServeCli, BadInvocationsExit2WithOneLine) {
  TempDir tmp("serve_bad");
  auto r = run_crucible({"serve", tmp / "nothing"});
  EXPECT_EQ(r.code, 2) << r.output;
  Served s = serve({}, "busy");
  r = run_crucible({"serve", run_dir(), "--port", std::to_string(s.port)});
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("cannot listen on 127.0.0.1:" + std::to_string(s.port)), std::string::npos)
      << r.output;
  r = run_crucible({"serve", run_dir(), "--port", "0", "--kv-blocks", "3"});
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("--kv-blocks 3"), std::string::npos) << r.output;
  r = run_crucible({"serve", run_dir(), "--port", "0", "--bind", "localhost:1"});
  EXPECT_EQ(r.code, 2) << r.output;
  stop(s);
}

}  // namespace
}  // namespace crucible
