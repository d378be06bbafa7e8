// Subcommand registration for the crucible binary.
#pragma once
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "core/status.h"
#include "runtime/run_dir.h"
#include "runtime/sim_run.h"

#define CRUCIBLE_VERSION_STRING "0.1.0"

namespace crucible::cli {

// Thrown by a subcommand to end the program with a message and exit code.
struct ExitError : std::runtime_error {
  ExitError(int c, const std::string& msg) : std::runtime_error(msg), code(c) {}
  int code;
};

void print_version();
void add_bench_command(CLI::App& app);
void add_train_command(CLI::App& app);
void add_tokenize_command(CLI::App& app);
void add_generate_command(CLI::App& app);
void add_export_command(CLI::App& app);
void add_import_command(CLI::App& app);
void add_plan_command(CLI::App& app);
void add_launch_command(CLI::App& app);
void add_probe_command(CLI::App& app);
void add_report_command(CLI::App& app);
void add_curate_command(CLI::App& app);
void add_sim_command(CLI::App& app);
void add_serve_command(CLI::App& app);
// The options of `crucible sim`, shared with `launch`, which reads them to
// supervise the run.
void add_sim_options(CLI::App& cmd, runtime::SimRequest& req, int64_t& stop_at);
// `crucible bench curate` (bench_curate.cc), registered by add_bench_command.
void add_bench_curate_command(CLI::App& bench);
// The options of `crucible train`, shared with `launch`, which reads them to
// supervise the run.
void add_train_options(CLI::App& cmd, runtime::RunRequest& req, int64_t& stop_at,
                       int* metrics_port = nullptr, std::string* metrics_bind = nullptr);

// Option checks whose refusals read well (CLI11's PositiveNumber prints its
// range with 300 digits and lets NaN through): a finite number in the range,
// and a decimal integer in the range ("-1" for an unsigned seed is refused,
// not wrapped to 2^64 - 1).
CLI::Validator number_in(double min, double max, bool min_inclusive = true);
CLI::Validator integer_in(int64_t min, int64_t max);
inline CLI::Validator positive() { return number_in(0, INFINITY, false); }
inline CLI::Validator non_negative() { return number_in(0, INFINITY, true); }

// The exit code for an error: 2 for bad input (config, data, checkpoint,
// flags), 1 for everything else.
int exit_code(const Status& s);

}  // namespace crucible::cli
