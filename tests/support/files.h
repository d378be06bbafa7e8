// Files for tests: a fresh temporary directory per test, and whole-file reads
// and writes (unlike crucible's own writes, these are deliberately not atomic:
// tests use them to damage files).
#pragma once
#include <string>

namespace crucible::testutil {

// A fresh empty directory under the test temp dir (name + pid), removed by the
// destructor.
class TempDir {
 public:
  explicit TempDir(const std::string& name);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& rel) const { return path_ + "/" + rel; }

 private:
  std::string path_;
};

// The current test's name, for TempDir names.
std::string current_test_name();

std::string read_file(const std::string& path);
void write_file(const std::string& path, const std::string& bytes);

}  // namespace crucible::testutil
