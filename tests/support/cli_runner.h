// Runs the crucible binary as a user would (a real process, real files) and
// captures its exit code and output, for end-to-end tests.
#pragma once
#include <string>
#include <vector>

#include "support/files.h"

namespace crucible::e2e {

struct CliResult {
  int code = -1;       // exit code (128 + N when killed by signal N)
  std::string output;  // stdout and stderr interleaved
};

// Runs build/crucible with `args` (each passed as one argument) in `cwd`.
CliResult run_crucible(const std::vector<std::string>& args, const std::string& cwd = ".");

using testutil::read_file;
using testutil::TempDir;
using testutil::write_file;

}  // namespace crucible::e2e
