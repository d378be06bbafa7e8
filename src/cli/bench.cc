// `crucible bench step`: the training-step benchmark (profile/step_bench.h).
// `crucible bench scaling`: strong scaling over world sizes (profile/scaling.h),
// from fresh training runs or existing run directories.
// `crucible bench curate`: curation throughput (bench_curate.cc).
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/clock.h"
#include "core/output_path.h"
#include "core/process.h"
#include "profile/scaling.h"
#include "profile/step_bench.h"
#include "runtime/config.h"

namespace crucible::cli {

namespace {

struct ScalingOptions {
  std::string workload = "tiny";
  std::vector<int> ranks;  // empty: 1,2,4 (running) or inferred (--runs)
  int64_t steps = 20;
  int skip = 3;
  std::vector<std::string> runs;
  std::vector<std::string> overrides;
  std::string run_root = "runs";
  std::string out = "scaling.json";
};

// Runs argv (argv[0] a path) to completion, output to this terminal; the exit code.
int run_child(const std::vector<std::string>& argv) {
  std::string line;
  for (const auto& a : argv) line += (line.empty() ? "" : " ") + a;
  std::fprintf(stderr, "[bench] scaling: %s\n", line.c_str());
  std::fflush(stderr);
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) throw ExitError(1, std::string("[bench] scaling: fork: ") + std::strerror(errno));
  if (pid == 0) {
    ::execv(cargv[0], cargv.data());
    std::fprintf(stderr, "[bench] scaling: cannot run %s: %s\n", cargv[0], std::strerror(errno));
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

// Trains the workload once per world size at one global batch: micro-batch
// train.batch_size on every rank, grad_accum = lcm(ranks) / N, so every run
// sees batch_size * lcm(ranks) sequences per optimizer step. Returns the run
// directories, in the order of o.ranks.
std::vector<std::string> run_scaling_trainings(const ScalingOptions& o) {
  std::string config_path;
  if (o.workload != "tiny") {
    config_path = "configs/" + o.workload + ".toml";
    if (!std::filesystem::exists(config_path))
      throw ExitError(2, "[bench] scaling: workload " + o.workload + ": no " + config_path +
                             " here (workloads: tiny, gpt2-124M; run from the repository root)");
  }
  auto cfg = runtime::load_config(config_path, o.overrides);
  if (!cfg) throw ExitError(2, cfg.status().message());
  if (o.steps <= o.skip)
    throw ExitError(2, "[bench] scaling: --steps " + std::to_string(o.steps) +
                           " leaves nothing after skipping " + std::to_string(o.skip));
  int lcm = 1;
  for (int n : o.ranks) lcm = std::lcm(lcm, n);
  const std::string root =
      o.run_root + "/scaling-" + o.workload + "-" + wall_time("%Y%m%d-%H%M%S", false);
  std::fprintf(stderr,
               "[bench] scaling: %s, %lld steps, %d sequences x %d tokens per step on every "
               "world size, runs in %s\n",
               o.workload.c_str(), (long long)o.steps, cfg->train.batch_size * lcm,
               cfg->model.seq_len, root.c_str());
  const std::string self = self_executable();
  std::vector<std::string> dirs;
  for (int n : o.ranks) {
    const std::string dir = root + "/n" + std::to_string(n);
    std::vector<std::string> argv = {self};
    if (n > 1) argv.insert(argv.end(), {"launch", "-n", std::to_string(n), "--"});
    argv.push_back("train");
    if (!config_path.empty()) argv.push_back(config_path);
    argv.insert(argv.end(), {"--run-dir", dir});
    std::vector<std::string> sets = o.overrides;
    sets.insert(sets.end(), {"train.steps=" + std::to_string(o.steps),
                             "train.grad_accum=" + std::to_string(lcm / n), "train.eval_every=0",
                             "ckpt.every=0", "run.sample_tokens=0"});
    for (const auto& s : sets) argv.insert(argv.end(), {"--set", s});
    int code = run_child(argv);
    if (code != 0)
      throw ExitError(code == 2 ? 2 : 1, "[bench] scaling: " + std::to_string(n) +
                                             " ranks: training exited with code " +
                                             std::to_string(code) + " (see " + dir + "/log.txt)");
    dirs.push_back(dir);
  }
  return dirs;
}

void run_scaling(ScalingOptions o) {
  if (Status s = check_output_path(o.out, "[bench] --out"); !s) throw ExitError(2, s.message());
  std::vector<std::string> dirs = o.runs;
  if (dirs.empty()) {
    if (o.ranks.empty()) o.ranks = {1, 2, 4};
    dirs = run_scaling_trainings(o);
  }
  auto r = profile::scaling_from_runs(dirs, o.ranks, o.skip);
  if (!r) throw ExitError(exit_code(r.status()), r.status().message());
  std::printf("%s", profile::scaling_table(*r).c_str());
  Status st = profile::write_scaling_json(o.out, *r);
  if (!st.is_ok()) throw ExitError(exit_code(st), st.message());
  std::printf("wrote %s\n", o.out.c_str());
}

void add_scaling_command(CLI::App& bench) {
  auto o = std::make_shared<ScalingOptions>();
  auto* cmd = bench.add_subcommand(
      "scaling",
      "Strong scaling: tokens/s at a fixed global batch (or a simulation's steps/s, from --runs) over world "
      "sizes, speedup, efficiency, "
      "Karp-Flatt and an Amdahl fit; trains each world size, or reads --runs");
  cmd->add_option("--workload", o->workload, "Workload to train: tiny | gpt2-124M")
      ->capture_default_str();
  cmd->add_option("--ranks", o->ranks,
                  "World sizes, e.g. 1,2,4 (default 1,2,4; with --runs: one per run "
                  "directory, default inferred from its metrics.rank*.jsonl)")
      ->delimiter(',')
      ->check(positive());
  cmd->add_option("--steps", o->steps, "Optimizer steps per training run")
      ->capture_default_str()
      ->check(positive());
  cmd->add_option("--skip", o->skip, "Leading steps left out of the median (warm-up)")
      ->capture_default_str()
      ->check(non_negative());
  cmd->add_option("--runs", o->runs, "Existing run directories to read instead of training");
  cmd->add_option("--set", o->overrides, "Config override for the training runs (repeatable)");
  cmd->add_option("--run-root", o->run_root, "Where the training runs go")->capture_default_str();
  cmd->add_option("--out", o->out, "scaling.json to write")->capture_default_str();
  cmd->callback([o] { run_scaling(*o); });
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto* bench = app.add_subcommand("bench", "Benchmarks");
  bench->require_subcommand(1);
  add_bench_curate_command(*bench);
  auto opt = std::make_shared<profile::StepBenchOptions>();
  auto json = std::make_shared<bool>(false);
  auto* step = bench->add_subcommand(
      "step",
      "Time the full training step (forward, loss, backward, AdamW) of a standard workload");
  step->add_option("--workload", opt->workload,
                   "Workload: tiny | gpt2-124M | gpt2-124M-T1024 | gpt2-350M-T1024 (the GPU ones)")
      ->capture_default_str();
  step->add_option("--device", opt->device, "cpu | cuda | cuda:N (as run.device)")->capture_default_str();
  step->add_option("--batch", opt->batch, "Sequences per step (default: the workload's)")->check(positive());
  step->add_option("--threads", opt->threads, "Threads (0 = all cores)")->capture_default_str();
  step->add_option("--steps", opt->steps, "Measured steps")
      ->capture_default_str()
      ->check(positive());
  step->add_option("--warmup", opt->warmup, "Warm-up steps")
      ->capture_default_str()
      ->check(non_negative());
  step->add_option("--seed", opt->seed, "Seed for weights and tokens")->capture_default_str();
  step->add_option("--precision", opt->precision, "fp32 | bf16 (as train.precision)")->capture_default_str();
  step->add_option("--recompute", opt->recompute, "none | selective | full (as train.recompute)")
      ->capture_default_str();
  step->add_option("--moments", opt->moments, "f32 | bf16 (as optim.moments)")->capture_default_str();
  step->add_flag("--fused-head", opt->fused_head, "The LM head and loss fused over chunks of rows (as train.fused_head)");
  step->add_option("--kernels", opt->kernels,
                   "Kernel table by ISA (generic | avx2 | avx512 | avx512bf16; default: the CPU's "
                   "best), to measure one ISA's kernels against another's");
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
  add_scaling_command(*bench);
}

}  // namespace crucible::cli
