// crucible: the one binary. Subcommands live in their own files; this file
// only dispatches and turns errors into exit codes (bad input -> 2).
#include <CLI/CLI.hpp>
#include <cstdio>

#include "cli/commands.h"
#include "core/allocator.h"

int main(int argc, char** argv) {
  CLI::App app{"crucible: train neural networks and understand the hardware doing it"};
  app.require_subcommand(1);
  app.set_version_flag("--version", CRUCIBLE_VERSION_STRING);
  auto* version = app.add_subcommand("version", "Print the version and the kernel ISA in use");
  version->callback([] { crucible::cli::print_version(); });
  crucible::cli::add_train_command(app);
  crucible::cli::add_generate_command(app);
  crucible::cli::add_export_command(app);
  crucible::cli::add_import_command(app);
  crucible::cli::add_plan_command(app);
  crucible::cli::add_curate_command(app);
  crucible::cli::add_tokenize_command(app);
  crucible::cli::add_launch_command(app);
  crucible::cli::add_bench_command(app);
  crucible::cli::add_probe_command(app);
  crucible::cli::add_report_command(app);
  crucible::cli::add_sim_command(app);
  crucible::cli::add_serve_command(app);
  // A first word that is no command and no option: name it, list the commands.
  if (argc > 1 && argv[1][0] != '-') {
    bool known = false;
    std::string names;
    for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
      known = known || sub->get_name() == argv[1];
      names += (names.empty() ? "" : ", ") + sub->get_name();
    }
    if (!known) {
      std::fprintf(stderr, "[crucible] unknown command '%s' (commands: %s; --help for more)\n", argv[1],
                   names.c_str());
      return 2;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  } catch (const crucible::cli::ExitError& e) {
    // An empty message: another rank of the job reports the problem.
    if (*e.what()) std::fprintf(stderr, "%s\n", e.what());
    return e.code;
  } catch (const std::exception& e) {
    // Last resort: an exception that escaped a module boundary is a bug in
    // crucible, never the user's input (the tests assert bad input does not
    // get here). One line, exit 1.
    const char* cmd = argc > 1 ? argv[1] : "crucible";
    std::fprintf(stderr, "[crucible] internal error in `%s` (a bug; please report it): %s\n", cmd, e.what());
    return 1;
  }
  // Everything a command allocated is released by now; what is left leaked.
  crucible::Allocator::global().report_leaks(stderr);
  return 0;
}
