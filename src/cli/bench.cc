#include "cli/commands.h"

namespace crucible::cli {

void add_bench_command(CLI::App& app) {
  app.add_subcommand("bench", "Benchmarks (step: the full training step)");
}

}  // namespace crucible::cli
