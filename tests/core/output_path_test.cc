// check_output_path / check_output_dir and AtomicFile's use of them: every
// kind of target that is not a regular file is refused and left as it was.
// The special files are made in the test's own directory (mknod as root);
// the machine's /dev is never touched.
#include "core/output_path.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include <filesystem>

#include "core/file_io.h"
#include "support/files.h"

namespace crucible {
namespace {

namespace fs = std::filesystem;
using testutil::TempDir;

struct Stat {
  ino_t ino = 0;
  mode_t mode = 0;
  timespec mtime{};
  bool operator==(const Stat& o) const {
    return ino == o.ino && mode == o.mode && mtime.tv_sec == o.mtime.tv_sec &&
           mtime.tv_nsec == o.mtime.tv_nsec;
  }
};

Stat lstat_of(const std::string& p) {
  struct stat st {};
  EXPECT_EQ(::lstat(p.c_str(), &st), 0) << p;
  return {st.st_ino, st.st_mode, st.st_mtim};
}

size_t entries(const std::string& dir) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
  return n;
}

// Refused by the check and by AtomicFile (which then creates nothing), the
// target unchanged.
void expect_refused(const std::string& path, const std::string& why) {
  SCOPED_TRACE(path);
  const bool existed = ::access(path.c_str(), F_OK) == 0 || fs::is_symlink(path);
  Stat before;
  if (existed) before = lstat_of(path);
  const std::string dir = fs::path(path).parent_path().string();
  const size_t n = fs::is_directory(dir) ? entries(dir) : 0;
  Status s = check_output_path(path, "[test] -o");
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("[test] -o"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(why), std::string::npos) << s.message();
  EXPECT_EQ(s.message().find('\n'), std::string::npos) << "one line";
  AtomicFile f;
  EXPECT_EQ(f.open(path).code(), Code::kInvalidArgument);
  EXPECT_EQ(write_file_atomic(path, "x").code(), Code::kInvalidArgument);
  if (existed) {
    EXPECT_TRUE(lstat_of(path) == before) << "the target changed";
  }
  if (fs::is_directory(dir)) {
    EXPECT_EQ(entries(dir), n) << "a temporary was left";
  }
}

class OutputPath : public ::testing::Test {
 protected:
  TempDir dir{"output_path"};
  std::string chr = dir / "null-like", fifo = dir / "fifo", sock = dir / "sock", sub = dir / "sub";

  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "mknod of a character device needs root";
    ASSERT_EQ(::mknod(chr.c_str(), S_IFCHR | 0666, makedev(1, 3)), 0);
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    ASSERT_LT(sock.size(), sizeof a.sun_path);
    std::snprintf(a.sun_path, sizeof a.sun_path, "%s", sock.c_str());
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    ::close(fd);
    fs::create_directory(sub);
    testutil::write_file(dir / "file", "old");
    for (const char* t : {"null-like", "fifo", "sub", "file"})
      fs::create_symlink(t, dir / (std::string("link-to-") + t));
  }
};

TEST_F(OutputPath, RefusesEveryTargetThatIsNotARegularFile) {
  expect_refused(chr, "is a character device");
  expect_refused(fifo, "is a FIFO");
  expect_refused(sock, "is a socket");
  expect_refused(sub, "is a directory");
  for (const char* t : {"null-like", "fifo", "sub", "file"})
    expect_refused(dir / (std::string("link-to-") + t), "is a symbolic link");
  fs::create_symlink("nowhere", dir / "dangling");
  expect_refused(dir / "dangling", "is a symbolic link");
}

TEST_F(OutputPath, RefusesNamesThatAreNoFile) {
  expect_refused("", "not a file name");
  expect_refused(sub + "/", "not a file name");
  expect_refused(dir / "missing/out.json", "does not exist");
  expect_refused(dir / "file/out.json", "is not a directory");
}

TEST_F(OutputPath, AcceptsANewOrRegularFileAndReplacesItWhole) {
  EXPECT_TRUE(check_output_path(dir / "new.json", "[test] -o").is_ok());
  EXPECT_TRUE(check_output_path(dir / "file", "[test] -o").is_ok());
  ASSERT_TRUE(write_file_atomic(dir / "file", "new").is_ok());
  EXPECT_EQ(testutil::read_file(dir / "file"), "new");
  // A directory reached through a link is fine: only the last component is judged.
  fs::create_directory_symlink("sub", dir / "subdir-link");
  EXPECT_TRUE(write_file_atomic(dir / "subdir-link/x", "y").is_ok());
  EXPECT_EQ(testutil::read_file(sub + "/x"), "y");
}

TEST_F(OutputPath, RefusesAFileInsideARunsCheckpointButNotTheCheckpointWriter) {
  const std::string run = dir / "run", step = run + "/ckpt/step_0000008";
  fs::create_directories(step);
  testutil::write_file(run + "/config.toml", "");
  testutil::write_file(step + "/model.safetensors", "weights");
  expect_refused(step + "/model.safetensors", "is inside the checkpoint directory");
  expect_refused(run + "/ckpt/new.safetensors", "is inside the checkpoint directory");
  expect_refused(dir / "run/./ckpt/../ckpt/step_0000008/x", "is inside the checkpoint directory");
  EXPECT_EQ(check_output_dir(step + "/out", "[test] -o").code(), Code::kInvalidArgument);
  // The run directory itself is not a checkpoint (export's default lands there).
  EXPECT_TRUE(check_output_path(run + "/step_0000008.safetensors", "[test] -o").is_ok());
  // The checkpoint writer writes there.
  EXPECT_TRUE(
      write_file_atomic(run + "/ckpt/latest", "step_0000008\n", OutputScope::kCheckpoint).is_ok());
  // A ckpt directory without config.toml beside it counts by its `latest`.
  fs::remove(run + "/config.toml");
  expect_refused(step + "/model.safetensors", "is inside the checkpoint directory");
}

TEST_F(OutputPath, DirectoryOutputs) {
  EXPECT_TRUE(check_output_dir(sub, "[test] -o").is_ok());
  EXPECT_TRUE(check_output_dir(dir / "new/deeper", "[test] -o").is_ok());  // parents are created
  for (const std::string& bad : {chr, fifo, sock, dir / "file", dir / "link-to-sub"}) {
    Status s = check_output_dir(bad, "[test] -o");
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << bad;
  }
  EXPECT_EQ(check_output_dir("", "[test] -o").code(), Code::kInvalidArgument);
  EXPECT_EQ(check_output_dir(dir / "file/x", "[test] -o").code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace crucible
