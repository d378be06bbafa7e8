// Subcommand registration for the crucible binary.
#pragma once
#include <CLI/CLI.hpp>
#include <stdexcept>
#include <string>

#define CRUCIBLE_VERSION_STRING "0.1.0"

namespace crucible::cli {

// Thrown by a subcommand to end the program with a message and exit code.
struct ExitError : std::runtime_error {
  ExitError(int c, const std::string& msg) : std::runtime_error(msg), code(c) {}
  int code;
};

void print_version();
void add_bench_command(CLI::App& app);

}  // namespace crucible::cli
