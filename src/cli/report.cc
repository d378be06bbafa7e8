// `crucible report RUN [-o FILE]`: one self-contained HTML page of a run
// (profile/report.h). Training writes RUN/report.html itself at the end.
#include <cstdio>
#include <memory>

#include "cli/commands.h"
#include "core/output_path.h"
#include "profile/report.h"

namespace crucible::cli {

void add_report_command(CLI::App& app) {
  auto run = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand(
      "report",
      "Write a self-contained HTML report of a run: losses, step-time breakdown, MFU, memory, "
      "per-rank comparison, events, probe, roofline, scaling");
  cmd->add_option("run", *run, "Run directory")->required();
  auto* given = cmd->add_option("-o,--output", *out, "Output file (default: RUN/report.html)");
  cmd->callback([run, out, given] {
    // The target is judged before the run is read (core/output_path.h); an
    // explicit -o "" is a bad name, not the default.
    Status s = check_output_path(given->count() == 0 ? *run + "/report.html" : *out, "[report] -o");
    if (s.is_ok()) s = profile::write_report(*run, *out);
    if (!s.is_ok()) throw ExitError(exit_code(s), s.message());
    std::printf("written: %s\n", (out->empty() ? *run + "/report.html" : *out).c_str());
  });
}

}  // namespace crucible::cli
