// Runs the crucible binary as a user would (a real process, real files) and
// captures its exit code and output, for end-to-end tests.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
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

// `crucible ARGS` started in the background in `cwd`, stdout and stderr to
// `log_path`; wait() returns its exit code (128 + N when killed by signal N).
struct Background {
  pid_t pid = -1;
  std::string log;
  Background(const std::vector<std::string>& args, const std::string& cwd, std::string log_path);
  int wait();
  // wait(), but at most timeout_s: then SIGKILL, reap and return -1 (a test
  // must fail, never hang, when the process ignores what it was asked).
  int wait_for(double timeout_s);
};

// The "step" of every row of RUN/metrics.jsonl, in file order.
std::vector<int64_t> metric_steps(const std::string& run);
// Every row of a metrics file (RUN/metrics.jsonl, RUN/metrics.rank{R}.jsonl), parsed.
std::vector<nlohmann::json> metric_rows(const std::string& path);
// step -> training loss of every row of RUN/metrics.jsonl that has one.
std::map<int64_t, double> step_losses(const std::string& run);

// `crucible launch -n RANKS --threads 1 -- train TRAIN_ARGS...`. Sets
// ASAN_OPTIONS=detect_leaks=0 for the ranks to inherit: in sanitizer builds
// Open MPI's unloaded components leave allocations LeakSanitizer cannot
// attribute or suppress (see CMakeLists.txt); no effect on other builds.
std::vector<std::string> launch_train(int ranks, const std::vector<std::string>& train_args);
// `crucible train TRAIN_ARGS...` in one process, else launch_train's.
std::vector<std::string> train_command(int ranks, const std::vector<std::string>& train_args);

// `crucible export RUN --step STEP`: the run's weights at that step as one
// safetensors file, whatever layout wrote the checkpoint (a failed export
// is a test failure and returns ""). Returns the file's path.
std::string export_weights(const std::string& run, int64_t step);

// Lines in a file (0 when it is missing).
size_t count_lines(const std::string& path);
// Polls (every 20 ms, at most timeout_s) until `done()`; false on timeout.
// For progress a run has no other way to tell: its files.
bool poll_until(const std::function<bool()>& done, double timeout_s = 120);

using testutil::read_file;
using testutil::TempDir;
using testutil::write_file;

}  // namespace crucible::e2e
