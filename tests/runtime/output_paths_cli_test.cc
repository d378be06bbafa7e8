// Every writer's output flag given what it must not replace (issue 32, item
// 6): a character device made with mknod, a FIFO, a socket, a symbolic link
// to each and to a directory, an existing directory, an empty path, a
// missing directory, and a file inside the newest checkpoint of a small run.
// Each is refused with one line and exit 2 before any work (the run or input
// named beside it does not even exist, so any work would fail differently),
// and the target is untouched: same inode, type and mtime. Everything is
// made in the test's own directory; the machine's /dev is never touched.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include <filesystem>

#include "support/cli_runner.h"
#include "support/train_config.h"

namespace crucible::e2e {
namespace {

namespace fs = std::filesystem;

struct Stat {
  bool exists = false;
  ino_t ino = 0;
  mode_t mode = 0;
  timespec mtime{};
  bool operator==(const Stat& o) const {
    return exists == o.exists && ino == o.ino && mode == o.mode && mtime.tv_sec == o.mtime.tv_sec &&
           mtime.tv_nsec == o.mtime.tv_nsec;
  }
};

Stat stat_of(const std::string& p) {
  struct stat st {};
  if (::lstat(p.c_str(), &st) != 0) return {};
  return {true, st.st_ino, st.st_mode, st.st_mtim};
}

void expect_refused(const std::vector<std::string>& args, const std::string& target,
                    const std::string& why, const std::string& cwd) {
  const std::string full = target.empty() || target[0] == '/' ? target : cwd + "/" + target;
  const Stat before = stat_of(full);
  auto r = run_crucible(args, cwd);
  std::string out = r.output;
  while (!out.empty() && out.back() == '\n') out.pop_back();
  SCOPED_TRACE(args[0] + " " + target);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(out.find(why), std::string::npos) << r.output;
  EXPECT_EQ(out.find('\n'), std::string::npos) << "more than one line:\n" << r.output;
  if (!full.empty()) {
    EXPECT_TRUE(stat_of(full) == before) << "the target changed";
  }
}

class OutputPathsCli : public ::testing::Test {
 protected:
  TempDir dir{"output_paths_cli"};

  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "mknod of a character device needs root";
    ASSERT_EQ(::mknod((dir / "dev").c_str(), S_IFCHR | 0666, makedev(1, 3)), 0);
    ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0644), 0);
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    const std::string sock = dir / "sock";
    ASSERT_LT(sock.size(), sizeof a.sun_path);
    std::snprintf(a.sun_path, sizeof a.sun_path, "%s", sock.c_str());
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    ::close(fd);
    fs::create_directory(dir / "existing_dir");
    write_file(dir / "plain", "mine");
    for (const char* t : {"dev", "fifo", "existing_dir", "plain"})
      fs::create_symlink(t, dir / (std::string("link-") + t));
  }

  // (target, what the one line says)
  std::vector<std::pair<std::string, std::string>> bad_files() const {
    return {{"dev", "is a character device"},
            {"fifo", "is a FIFO"},
            {"sock", "is a socket"},
            {"existing_dir", "is a directory"},
            {"link-dev", "is a symbolic link"},
            {"link-fifo", "is a symbolic link"},
            {"link-existing_dir", "is a symbolic link"},
            {"link-plain", "is a symbolic link"},
            {"", "not a file name"},
            {"no/such/dir/out", "does not exist"}};
  }
};

TEST_F(OutputPathsCli, EveryFileWriterRefusesBeforeAnyWork) {
  for (const auto& [target, why] : bad_files()) {
    expect_refused({"export", "no_such_run", "-o", target}, target, "[export] -o " + std::string(),
                   dir.path());
    expect_refused({"export", "no_such_run", "-o", target}, target, why, dir.path());
    expect_refused({"report", "no_such_run", "-o", target}, target, why, dir.path());
    expect_refused({"probe", "--sections", "compute", "--json", target}, target, why, dir.path());
    expect_refused({"plan", "--calibrate", "no_such_run", "-o", target}, target, why, dir.path());
    expect_refused({"plan", "--cluster-from-probe", "no_such_probe.json", "-o", target}, target,
                   why, dir.path());
    expect_refused({"bench", "scaling", "--runs", "no_such_run", "--out", target}, target, why,
                   dir.path());
  }
}

TEST_F(OutputPathsCli, EveryDirectoryWriterRefusesBeforeAnyWork) {
  for (const auto& [target, why] :
       std::vector<std::pair<std::string, std::string>>{{"dev", "is a character device"},
                                                        {"fifo", "is a FIFO"},
                                                        {"plain", "the output must be a directory"},
                                                        {"link-existing_dir", "is a symbolic link"},
                                                        {"link-dev", "is a symbolic link"},
                                                        {"", "not a directory name"},
                                                        {"plain/sub", "is not a directory"}}) {
    expect_refused({"curate", "no_such_corpus", "-o", target}, target, why, dir.path());
    expect_refused({"tokenize", "no_such_corpus", "-o", target}, target, why, dir.path());
  }
}

// A file inside the newest checkpoint of a real run: export and report
// refuse it and the checkpoint still verifies (the next resume would
// otherwise fall back a checkpoint).
TEST_F(OutputPathsCli, NoWriterWritesIntoARunsCheckpoint) {
  testutil::SmallRun small = testutil::short_run();
  small.eval_every = 0;
  const std::string cfg = testutil::write_small_config(dir, small);
  auto trained = run_crucible({"train", cfg, "--run-dir", dir / "run"});
  ASSERT_EQ(trained.code, 0) << trained.output;
  const std::string step = dir / "run/ckpt/step_0000008", weights = step + "/model.safetensors";
  ASSERT_TRUE(fs::exists(weights));
  const std::string before = read_file(weights);
  expect_refused({"export", "run", "-o", "run/ckpt/step_0000008/model.safetensors"},
                 "run/ckpt/step_0000008/model.safetensors", "is inside the checkpoint directory",
                 dir.path());
  expect_refused({"export", "run", "-o", "run/ckpt/step_0000008/other.safetensors"},
                 "run/ckpt/step_0000008/other.safetensors", "is inside the checkpoint directory",
                 dir.path());
  expect_refused({"report", "run", "-o", "run/ckpt/latest"}, "run/ckpt/latest",
                 "is inside the checkpoint directory", dir.path());
  expect_refused({"probe", "--sections", "compute", "--json", "run/ckpt/probe.json"},
                 "run/ckpt/probe.json", "is inside the checkpoint directory", dir.path());
  expect_refused({"curate", "no_such_corpus", "-o", "run/ckpt/curated"}, "run/ckpt/curated",
                 "is inside the checkpoint directory", dir.path());
  EXPECT_FALSE(fs::exists(step + "/other.safetensors"));
  EXPECT_TRUE(read_file(weights) == before);
  // The same run exports and reports where it may.
  auto ok = run_crucible({"export", "run", "-o", "w.safetensors"}, dir.path());
  EXPECT_EQ(ok.code, 0) << ok.output;
  EXPECT_EQ(run_crucible({"report", "run", "-o", "r.html"}, dir.path()).code, 0);
  // And a plain file is replaced whole, never written through a link.
  write_file(dir / "target", "keep me");
  fs::create_symlink("target", dir / "link-target");
  expect_refused({"export", "run", "-o", "link-target"}, "link-target", "is a symbolic link",
                 dir.path());
  EXPECT_EQ(read_file(dir / "target"), "keep me");
}

}  // namespace
}  // namespace crucible::e2e
