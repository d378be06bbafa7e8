// Checked files: every byte of a section, the table and the trailer is covered
// by a checksum; damage anywhere is reported naming the file.
#include "core/checked_file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <unistd.h>
#include <cstdlib>

#include "support/files.h"

namespace crucible {
namespace {

using testutil::read_file;
using testutil::TempDir;
using testutil::write_file;

std::string random_bytes(std::mt19937_64& rng, size_t n) {
  std::string s(n, '\0');
  for (auto& c : s) c = char(rng());
  return s;
}

TEST(CheckedFile, SectionsRoundTrip) {
  TempDir dir("checked_roundtrip");
  std::mt19937_64 rng(1);
  std::vector<std::string> parts = {random_bytes(rng, 1000), "", random_bytes(rng, 70000), "x"};
  CheckedWriter w;
  ASSERT_TRUE(w.open(dir / "f").is_ok());
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) w.end_section();
    ASSERT_TRUE(w.append(parts[i]).is_ok());
  }
  ASSERT_TRUE(w.commit().is_ok());
  auto r = CheckedReader::open(dir / "f");
  ASSERT_TRUE(r) << r.status().message();
  ASSERT_EQ(r->sections(), parts.size());
  for (size_t i = 0; i < parts.size(); ++i) {
    std::string got;
    ASSERT_TRUE(r->read(i, &got).is_ok());
    EXPECT_EQ(got, parts[i]) << i;
    EXPECT_EQ(r->section_size(i), parts[i].size());
  }
  EXPECT_TRUE(r->verify_all().is_ok());
  // No temporary file is left next to it.
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) files += e.is_regular_file();
  EXPECT_EQ(files, 1u);
}

TEST(CheckedFile, EveryFlippedByteIsDetected) {
  TempDir dir("checked_flip");
  std::mt19937_64 rng(2);
  CheckedWriter w;
  ASSERT_TRUE(w.open(dir / "good").is_ok());
  ASSERT_TRUE(w.append(random_bytes(rng, 300)).is_ok());
  w.end_section();
  ASSERT_TRUE(w.append(random_bytes(rng, 200)).is_ok());
  ASSERT_TRUE(w.commit().is_ok());
  const std::string good = read_file(dir / "good");
  // Every byte: payload, table, count, table hash, magic.
  for (size_t at = 0; at < good.size(); ++at) {
    std::string bad = good;
    bad[at] ^= char(1 << (at % 8));
    write_file(dir / "bad", bad);
    auto r = CheckedReader::open(dir / "bad");
    Status s = r ? r->verify_all() : r.status();
    ASSERT_FALSE(s.is_ok()) << "flip at byte " << at << " of " << good.size() << " went unnoticed";
    EXPECT_EQ(s.code(), Code::kCorrupt) << s.message();
    EXPECT_NE(s.message().find(dir / "bad"), std::string::npos) << s.message();
  }
}

TEST(CheckedFile, TruncatedMissingAndForeignFiles) {
  TempDir dir("checked_trunc");
  ASSERT_TRUE(write_checked(dir / "f", std::string(5000, 'a')).is_ok());
  std::string full = read_file(dir / "f");
  for (size_t keep : {size_t(0), size_t(10), full.size() / 2, full.size() - 1}) {
    write_file(dir / "t", full.substr(0, keep));
    auto r = read_checked(dir / "t");
    ASSERT_FALSE(r) << keep;
    EXPECT_EQ(r.status().code(), Code::kCorrupt) << r.status().message();
  }
  auto missing = read_checked(dir / "none");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.status().code(), Code::kNotFound);
  write_file(dir / "plain", std::string(100, 'p'));
  auto foreign = read_checked(dir / "plain");
  ASSERT_FALSE(foreign);
  EXPECT_NE(foreign.status().message().find("no checked-file trailer"), std::string::npos);
  auto whole = read_checked(dir / "f");
  ASSERT_TRUE(whole);
  EXPECT_EQ(*whole, std::string(5000, 'a'));
}

}  // namespace
}  // namespace crucible

namespace crucible {
namespace {

// A full disk: a real small tmpfs (needs root, as CI has; skipped otherwise).
// The failure names the file and the OS's reason, and leaves no file.
TEST(CheckedFile, AFullDiskNamesTheReason) {
  testutil::TempDir dir("checked_full");
  const std::string mnt = dir / "small";
  std::filesystem::create_directories(mnt);
  if (::geteuid() != 0 || std::system(("mount -t tmpfs -o size=64k tmpfs " + mnt + " 2>/dev/null").c_str()) != 0)
    GTEST_SKIP() << "cannot mount a small tmpfs here";
  Status s;
  {
    CheckedWriter w;
    s = w.open(mnt + "/chunk-00000.sigs");
    std::vector<char> block(32 * 1024, 'x');
    for (int i = 0; i < 4 && s.is_ok(); ++i) {
      s = w.append(block.data(), block.size());
      w.end_section();
    }
    if (s.is_ok()) s = w.commit();
  }
  std::vector<std::string> left;
  for (const auto& e : std::filesystem::directory_iterator(mnt)) left.push_back(e.path().filename());
  EXPECT_EQ(std::system(("umount " + mnt).c_str()), 0);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("chunk-00000.sigs"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("No space left on device"), std::string::npos) << s.message();
  EXPECT_TRUE(left.empty()) << testing::PrintToString(left);
}

}  // namespace
}  // namespace crucible
