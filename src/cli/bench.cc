// `crucible bench step`: the training-step benchmark (profile/step_bench.h).
#include <cstdio>
#include <memory>

#include "cli/commands.h"
#include "profile/step_bench.h"

namespace crucible::cli {

void add_bench_command(CLI::App& app) {
  auto* bench = app.add_subcommand("bench", "Benchmarks");
  bench->require_subcommand(1);
  auto opt = std::make_shared<profile::StepBenchOptions>();
  auto json = std::make_shared<bool>(false);
  auto* step = bench->add_subcommand(
      "step",
      "Time the full training step (forward, loss, backward, AdamW) of a standard workload");
  step->add_option("--workload", opt->workload, "Workload: tiny | gpt2-124M")
      ->capture_default_str();
  step->add_option("--threads", opt->threads, "Threads (0 = all cores)")->capture_default_str();
  step->add_option("--steps", opt->steps, "Measured steps")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  step->add_option("--warmup", opt->warmup, "Warm-up steps")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  step->add_option("--seed", opt->seed, "Seed for weights and tokens")->capture_default_str();
  step->add_flag("--json", *json, "Print one JSON object instead of a table");
  step->callback([opt, json] {
    opt->progress = !*json;
    auto r = profile::run_step_bench(*opt);
    if (!r) throw ExitError(2, r.status().message());
    if (*json)
      std::printf("%s\n", profile::to_json(*r).dump().c_str());
    else
      std::printf("%s", profile::to_table(*r).c_str());
  });
}

}  // namespace crucible::cli
