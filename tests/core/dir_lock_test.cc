#include "core/dir_lock.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "support/files.h"

namespace crucible {
namespace {

namespace fs = std::filesystem;

TEST(DirLock, SecondHolderIsRefusedAtOnceNamingTheFirst) {
  testutil::TempDir dir("dir_lock");
  DirLock first, second;
  ASSERT_TRUE(first.acquire(dir / "run", "owner.lock", "crucible train", 0, "hint").is_ok());
  EXPECT_TRUE(first.created_dir());
  Status s = second.acquire(dir / "run", "owner.lock", "crucible launch", 0, "choose another --run-dir");
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("in use by crucible train (pid " + std::to_string(::getpid())),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("choose another --run-dir"), std::string::npos);
  EXPECT_FALSE(second.held());
  EXPECT_FALSE(second.created_dir());
  first.release();
  ASSERT_TRUE(second.acquire(dir / "run", "owner.lock", "crucible launch", 0, "hint").is_ok());
  EXPECT_NE(testutil::read_file(dir / "run/owner.lock").find("crucible launch"), std::string::npos);
}

TEST(DirLock, AWaiterIsToldWhoItWaitsForAndGetsTheLockWhenFreed) {
  testutil::TempDir dir("dir_lock_wait");
  DirLock first;
  ASSERT_TRUE(first.acquire(dir.path(), ".lock", "crucible curate", 0, "").is_ok());
  std::string told;
  DirLock second;
  Status s = second.acquire(dir.path(), ".lock", "crucible train", 0.2, "", [&](const std::string& h) {
    told = h;
    first.release();  // the holder ends while we wait
  });
  EXPECT_TRUE(s.is_ok()) << s.message();
  EXPECT_NE(told.find("crucible curate"), std::string::npos) << told;
}

TEST(DirLock, AnUncreatableDirectoryIsBadInput) {
  testutil::TempDir dir("dir_lock_bad");
  testutil::write_file(dir / "file", "x");
  DirLock lock;
  Status s = lock.acquire(dir / "file/run", "owner.lock", "crucible train", 0, "");
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("file/run"), std::string::npos);
}

}  // namespace
}  // namespace crucible
