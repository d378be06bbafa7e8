// check_hostfile: a hostfile that cannot work is bad input (exit 2) before any
// mpirun starts, instead of restarts with backoff and Open MPI banners.
#include <gtest/gtest.h>

#include "runtime/supervisor.h"
#include "support/files.h"

namespace crucible::runtime {
namespace {

Status check(const testutil::TempDir& dir, const std::string& text, int ranks) {
  testutil::write_file(dir / "hosts", text);
  return check_hostfile(dir / "hosts", ranks);
}

TEST(Hostfile, UsableFilesPass) {
  testutil::TempDir dir("hostfile_ok");
  EXPECT_TRUE(check(dir, "localhost slots=2\n", 2).is_ok());
  EXPECT_TRUE(check(dir, "# two hosts\nh1 slots=1 max_slots=2\n\nh2 slots=1  # second\n", 2).is_ok());
  EXPECT_TRUE(check(dir, "h1\n", 4).is_ok());  // no slots=: Open MPI counts the host's cores
}

TEST(Hostfile, EachUnworkableFileNamesItsProblem) {
  testutil::TempDir dir("hostfile_bad");
  struct Case {
    std::string text;
    int ranks;
    std::string needle;
  };
  for (const Case& c : std::vector<Case>{
           {"localhost slots=1\n", 2, "has 1 slot(s) for 2 ranks"},
           {"localhost slots=abc\n", 2, "hosts:1: slots must be a positive integer, got 'abc'"},
           {"localhost slots=0\n", 1, "slots must be a positive integer, got '0'"},
           {"localhost slots=\n", 1, "got ''"},
           {"", 2, "names no host"},
           {"# only a comment\n\n", 2, "names no host"},
           {"h1 slots=1\nh2 cpus=4\n", 2, "hosts:2: 'cpus=4' is not slots=N"},
       }) {
    Status s = check(dir, c.text, c.ranks);
    ASSERT_FALSE(s.is_ok()) << c.text;
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << c.text;
    EXPECT_NE(s.message().find(c.needle), std::string::npos) << c.text << " -> " << s.message();
    EXPECT_EQ(s.message().find('\n'), std::string::npos) << s.message();
  }
  Status missing = check_hostfile(dir / "nope", 2);
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.message().find("nope"), std::string::npos);
  Status directory = check_hostfile(dir.path(), 2);
  ASSERT_FALSE(directory.is_ok());
  EXPECT_NE(directory.message().find("not a regular file"), std::string::npos);
}

}  // namespace
}  // namespace crucible::runtime
