#include "profile/probe_storage.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

#include "support/files.h"

namespace crucible::profile {
namespace {

namespace fs = std::filesystem;

size_t entries(const std::string& dir) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
  return n;
}

bool positive(const nlohmann::json& j, const char* key) {
  if (!j.contains(key) || !j[key].is_number()) return false;
  double v = j[key].get<double>();
  return std::isfinite(v) && v > 0;
}

TEST(ProbeStorage, MeasuresValidatesAndRemovesItsFile) {
  testutil::TempDir dir(testutil::current_test_name());
  testutil::write_file(dir / "keep.txt", "not ours");
  StorageOptions o;
  o.dir = dir.path();
  o.quick = true;
  o.seq_bytes = 8 << 20;  // 2 blocks: well under a second even on slow disks
  o.random_reads = 200;
  nlohmann::json s = probe_storage(o);

  EXPECT_TRUE(s.value("valid", false)) << s.dump();
  EXPECT_FALSE(s.contains("error")) << s.dump();
  EXPECT_EQ(s.value("dir", std::string()), dir.path());
  EXPECT_FALSE(s.value("filesystem", std::string()).empty());
  EXPECT_TRUE(positive(s, "free_bytes"));
  EXPECT_EQ(s.value("file_bytes", size_t(0)), size_t(8) << 20);
  EXPECT_TRUE(positive(s, "seq_write_gbs")) << s.dump();
  EXPECT_TRUE(positive(s, "seq_read_gbs")) << s.dump();
  ASSERT_TRUE(s.contains("direct_io"));
  EXPECT_TRUE(s["direct_io"].is_boolean());
  EXPECT_EQ(s.value("rand_reads", 0), 200);
  ASSERT_TRUE(s.contains("rand_read_4k_us"));
  const auto& r = s["rand_read_4k_us"];
  for (const char* k : {"p50", "p99", "mean"}) EXPECT_TRUE(positive(r, k)) << k << " " << r.dump();
  EXPECT_LE(r.value("p50", 0.0), r.value("p99", 0.0));

  // Only the file we put there remains.
  EXPECT_EQ(entries(dir.path()), 1u);
  EXPECT_TRUE(fs::exists(dir / "keep.txt"));

  std::string table = storage_table(s);
  EXPECT_NE(table.find(dir.path()), std::string::npos) << table;
  EXPECT_NE(table.find("seq write"), std::string::npos) << table;
  EXPECT_NE(table.find("p99"), std::string::npos) << table;
  EXPECT_EQ(table.find("INVALID"), std::string::npos) << table;
}

TEST(ProbeStorage, MoreRandomReadsThanPagesStillVerify) {
  testutil::TempDir dir(testutil::current_test_name());
  StorageOptions o;
  o.dir = dir.path();
  o.seq_bytes = 10000;  // rounds up to 3 pages; a partial 4 MiB block
  o.random_reads = 50;  // pages repeat
  nlohmann::json s = probe_storage(o);
  EXPECT_TRUE(s.value("valid", false)) << s.dump();
  EXPECT_EQ(s.value("file_bytes", size_t(0)), size_t(3 * 4096));
  EXPECT_EQ(s.value("rand_reads", 0), 50);
  EXPECT_EQ(entries(dir.path()), 0u);
}

TEST(ProbeStorage, MissingDirectoryIsAnErrorMember) {
  testutil::TempDir dir(testutil::current_test_name());
  StorageOptions o;
  o.dir = dir / "does/not/exist";
  o.seq_bytes = 1 << 20;
  nlohmann::json s = probe_storage(o);
  EXPECT_FALSE(s.value("valid", true));
  EXPECT_EQ(s.value("dir", std::string()), o.dir);
  std::string err = s.value("error", std::string());
  EXPECT_EQ(err.rfind("[probe] storage", 0), 0u) << err;
  EXPECT_NE(err.find("does/not/exist"), std::string::npos) << err;
  EXPECT_FALSE(s.contains("seq_write_gbs"));
  EXPECT_NE(storage_table(s).find("INVALID"), std::string::npos);
}

TEST(ProbeStorage, FileInsteadOfDirectoryIsAnErrorMember) {
  testutil::TempDir dir(testutil::current_test_name());
  testutil::write_file(dir / "plain", "x");
  StorageOptions o;
  o.dir = dir / "plain";
  nlohmann::json s = probe_storage(o);
  EXPECT_FALSE(s.value("valid", true));
  EXPECT_NE(s.value("error", std::string()).find("not a directory"), std::string::npos) << s.dump();
}

TEST(ProbeStorage, PseudoFileSystemIsAnErrorMember) {
  StorageOptions o;
  o.dir = "/proc";  // no space, no files: refused before anything is written
  nlohmann::json s = probe_storage(o);
  EXPECT_FALSE(s.value("valid", true)) << s.dump();
  EXPECT_EQ(s.value("filesystem", std::string()), "proc");
  EXPECT_EQ(s.value("error", std::string()).rfind("[probe] storage /proc: ", 0), 0u) << s.dump();
  EXPECT_FALSE(s.contains("seq_write_gbs"));
}

// A *DeathTest suite runs before other tests start OpenMP threads (fork is safe).
TEST(ProbeStorageDeathTest, UnwritableDirectoryIsAnErrorMemberAndLeavesNothing) {
  testutil::TempDir dir(testutil::current_test_name());
  std::string ro = dir / "ro";
  fs::create_directories(ro);
  ASSERT_EQ(::chmod(ro.c_str(), 0555), 0);
  StorageOptions o;
  o.dir = ro;
  o.seq_bytes = 1 << 20;
  // Root ignores permissions, so the probe runs in a forked child (gtest's
  // default "fast" style: it shares this test's directory) that drops to an
  // unprivileged user first.
  EXPECT_EXIT(
      {
        if (::geteuid() == 0 && ::setuid(65534) != 0) std::_Exit(3);
        nlohmann::json s = probe_storage(o);
        std::fprintf(stderr, "%s\n", s.dump().c_str());
        bool refused =
            !s.value("valid", true) &&
            s.value("error", std::string()).find("cannot create " + ro) != std::string::npos;
        std::_Exit(refused ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "Permission denied");
  ::chmod(ro.c_str(), 0755);
  EXPECT_EQ(entries(ro), 0u);
}

TEST(ProbeStorage, PatternCheckCatchesCorruptionAndMisplacedPages) {
  const size_t n = 3 * 4096;
  const uint64_t offset = (uint64_t(4) << 20) - 4096;  // straddles a 4 MiB pattern period
  std::vector<unsigned char> buf(n);
  fill_probe_pattern(offset, buf.data(), n);
  ASSERT_TRUE(check_probe_pattern(offset, buf.data(), n).is_ok());

  // Pages are distinct, so the same bytes do not verify at another offset,
  // not even one pattern period (4 MiB) away where only the stamp differs.
  EXPECT_FALSE(check_probe_pattern(offset + 4096, buf.data(), n).is_ok());
  Status moved = check_probe_pattern(offset + (uint64_t(4) << 20), buf.data(), n);
  ASSERT_FALSE(moved.is_ok());
  EXPECT_NE(moved.message().find("another offset"), std::string::npos) << moved.message();

  // One flipped bit is caught and located.
  buf[4096 + 1000] ^= 0x10;
  Status st = check_probe_pattern(offset, buf.data(), n);
  ASSERT_FALSE(st.is_ok());
  EXPECT_EQ(st.code(), Code::kCorrupt);
  EXPECT_NE(st.message().find("offset " + std::to_string(offset + 4096 + 1000)), std::string::npos)
      << st.message();
  EXPECT_EQ(st.message().rfind("[probe] storage", 0), 0u) << st.message();
}

TEST(ProbeStorage, FilesystemIdentityAndNames) {
  testutil::TempDir dir(testutil::current_test_name());
  fs::create_directories(dir / "sub");
  std::string id = filesystem_id(dir.path());
  EXPECT_FALSE(id.empty());
  EXPECT_NE(id.find(':'), std::string::npos) << id;
  EXPECT_EQ(filesystem_id(dir / "sub"), id);  // same file system
  EXPECT_EQ(filesystem_id(dir / "missing"), "");
  if (filesystem_id("/proc") != "") {
    EXPECT_NE(filesystem_id("/proc"), id);
  }

  EXPECT_EQ(filesystem_name(0xEF53), "ext4");
  EXPECT_EQ(filesystem_name(0x58465342), "xfs");
  EXPECT_EQ(filesystem_name(0x01021994), "tmpfs");
  EXPECT_EQ(filesystem_name(0x794C7630), "overlay");
  EXPECT_EQ(filesystem_name(0x12345678), "unknown(0x12345678)");
}

TEST(ProbeStorage, TableTakesOneObjectOrAList) {
  nlohmann::json a = {
      {"dir", "/runs"},       {"filesystem", "ext4"},
      {"free_bytes", 1e12},   {"file_bytes", 64 << 20},
      {"seq_write_gbs", 1.5}, {"seq_read_gbs", 2.5},
      {"direct_io", true},    {"rand_read_4k_us", {{"p50", 90.0}, {"p99", 300.0}, {"mean", 110.0}}},
      {"rand_reads", 500},    {"valid", true}};
  nlohmann::json b = {{"dir", "/data"}, {"valid", false}, {"error", "[probe] storage /data: nope"}};
  std::string t = storage_table(nlohmann::json::array({a, b}));
  EXPECT_NE(t.find("/runs (ext4"), std::string::npos) << t;
  EXPECT_NE(t.find("1.50 GB/s"), std::string::npos) << t;
  EXPECT_NE(t.find("O_DIRECT"), std::string::npos) << t;
  EXPECT_NE(t.find("/data"), std::string::npos) << t;
  EXPECT_NE(t.find("INVALID: [probe] storage /data: nope"), std::string::npos) << t;
}

}  // namespace
}  // namespace crucible::profile
