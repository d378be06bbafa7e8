#include "core/file_io.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace crucible {
namespace {

namespace fs = std::filesystem;

std::string slurp(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

size_t entries(const std::string& dir) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
  return n;
}

TEST(FileIo, CommitReplacesTheTargetWhole) {
  std::string dir = ::testing::TempDir() + "crucible_fileio_" + std::to_string(::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  ASSERT_TRUE(write_file_atomic(dir + "/f", "old contents").is_ok());
  AtomicFile f;
  ASSERT_TRUE(f.open(dir + "/f").is_ok());
  ASSERT_TRUE(f.write("xxxx-new", 8).is_ok());
  ASSERT_TRUE(f.pwrite("HEAD", 4, 0).is_ok());
  EXPECT_EQ(slurp(dir + "/f"), "old contents");  // untouched until commit
  EXPECT_EQ(entries(dir), 2u);                    // target + temporary
  ASSERT_TRUE(f.commit().is_ok());
  EXPECT_EQ(slurp(dir + "/f"), "HEAD-new");
  EXPECT_EQ(entries(dir), 1u);
  fs::remove_all(dir);
}

TEST(FileIo, AbandonedWriteLeavesNothing) {
  std::string dir = ::testing::TempDir() + "crucible_fileio2_" + std::to_string(::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  {
    AtomicFile f;
    ASSERT_TRUE(f.open(dir + "/g").is_ok());
    ASSERT_TRUE(f.write("partial", 7).is_ok());
  }  // destroyed without commit
  EXPECT_EQ(entries(dir), 0u);
  fs::remove_all(dir);
}

TEST(FileIo, ErrorsNameTheFile) {
  Status s = write_file_atomic("/nonexistent-dir/x/y.bin", "data");
  ASSERT_FALSE(s.is_ok());
  // Judged before anything is created (core/output_path.h): bad input.
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("/nonexistent-dir/x/y.bin"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("its directory /nonexistent-dir/x does not exist"), std::string::npos)
      << s.message();
}

}  // namespace
}  // namespace crucible
