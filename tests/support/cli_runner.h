// Runs the crucible binary as a user would (a real process, real files) and
// captures its exit code and output, for end-to-end tests.
#pragma once
#include <string>
#include <vector>

namespace crucible::e2e {

struct CliResult {
  int code = -1;       // exit code (128 + N when killed by signal N)
  std::string output;  // stdout and stderr interleaved
};

// Runs build/crucible with `args` (each passed as one argument) in `cwd`.
CliResult run_crucible(const std::vector<std::string>& args, const std::string& cwd = ".");

// A fresh empty directory under the test temp dir, removed by the destructor.
class TempDir {
 public:
  explicit TempDir(const std::string& name);
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& rel) const { return path_ + "/" + rel; }

 private:
  std::string path_;
};

std::string read_file(const std::string& path);
void write_file(const std::string& path, const std::string& bytes);

}  // namespace crucible::e2e
