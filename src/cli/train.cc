// `crucible train`, `crucible tokenize`: thin wrappers over runtime/ and data/.
#include <cstdio>
#include <filesystem>
#include <memory>

#include "cli/commands.h"
#include "core/output_path.h"
#include "data/dataset.h"
#include "runtime/console.h"
#include "runtime/heartbeat.h"
#include "runtime/run_dir.h"
#include "runtime/trainer.h"

namespace crucible::cli {

int exit_code(const Status& s) {
  switch (s.code()) {
    case Code::kInvalidArgument:
    case Code::kNotFound:
    case Code::kCorrupt:
      return 2;  // bad input: config, data, checkpoint, flags
    default:
      return 1;
  }
}

void add_train_options(CLI::App& cmd, runtime::RunRequest& req, int64_t& stop_at,
                       int* metrics_port, std::string* metrics_bind) {
  cmd.add_option("config", req.config_path, "TOML config file (see configs/)");
  cmd.add_option("--run-dir", req.run_dir, "Run directory (default: runs/<run.name>-<date>-<time>)");
  cmd.add_option("--set", req.overrides, "Override a config key: section.key=value (repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd.add_flag("--resume", req.resume,
               "Continue from the newest valid checkpoint of --run-dir (or of the newest "
               "runs/<run.name>-*)");
  cmd.add_option("--stop-at", stop_at,
                 "Checkpoint and stop after this many steps (continue later with --resume)")
      ->check(positive());
  if (metrics_port)
    cmd.add_option("--metrics-port", *metrics_port,
                   "Serve live metrics for Prometheus on this port (rank r: port + r)")
        ->check(integer_in(1, 65535));
  if (metrics_bind)
    cmd.add_option("--metrics-bind", *metrics_bind,
                   "Address the metrics server listens on (0.0.0.0: every interface)")
        ->capture_default_str();
}

void add_train_command(CLI::App& app) {
  auto req = std::make_shared<runtime::RunRequest>();
  auto stop_at = std::make_shared<int64_t>(0);
  auto metrics_port = std::make_shared<int>(0);
  auto metrics_bind = std::make_shared<std::string>("127.0.0.1");
  auto* cmd = app.add_subcommand(
      "train",
      "Train a GPT. Without CONFIG: the embedded default (configs/tiny.toml) on the "
      "fortunes corpus");
  add_train_options(*cmd, *req, *stop_at, metrics_port.get(), metrics_bind.get());
  cmd->callback([req, stop_at, metrics_port, metrics_bind] {
    // Under `crucible launch` the supervisor hears how this rank ended.
    auto fail = [](int code, const std::string& msg) {
      runtime::heartbeat_exit(code, msg);
      throw ExitError(code, msg);
    };
    auto plan = runtime::plan_run(*req);
    if (!plan) fail(exit_code(plan.status()), plan.status().message());
    runtime::Console console(plan->config.run.log_every_s);
    auto r = runtime::train(*plan, {*stop_at, *metrics_port, *metrics_bind}, console);
    if (!r) {
      console.finish_progress();
      console.log_only(r.status().message());
      fail(exit_code(r.status()), r.status().message());
    }
    if (r->preempted) {
      console.log_only("[train] stopped by a signal");
      fail(runtime::kExitPreempted, r->reporter ? "[train] stopped by a signal" : "");
    }
    runtime::heartbeat_exit(0, "");
  });
}

void add_tokenize_command(CLI::App& app) {
  auto spec = std::make_shared<data::DatasetSpec>();
  auto out = std::make_shared<std::string>();
  auto* cmd =
      app.add_subcommand("tokenize",
                         "Train a SentencePiece BPE tokenizer on a corpus and write token shards "
                         "(train/validation) that `crucible train` reads with data.dataset=OUT");
  cmd->add_option("inputs", spec->sources, "Corpus files or directories")->required();
  cmd->add_option("-o,--output", *out, "Dataset directory to create")->required();
  cmd->add_option("--format", spec->format, "auto | fortunes | text | jsonl")
      ->capture_default_str();
  cmd->add_option("--vocab-size", spec->vocab_size, "Tokenizer vocabulary size")
      ->capture_default_str()
      ->check(integer_in(260, 1 << 20));
  cmd->add_option("--val-fraction", spec->val_fraction, "Share of tokens held out")
      ->capture_default_str()
      ->check(number_in(0.001, 0.5));
  cmd->callback([spec, out] {
    if (Status s = check_output_dir(*out, "[data] -o"); !s) throw ExitError(2, s.message());
    if (std::filesystem::exists(*out))
      throw ExitError(2, "[data] " + *out + " already exists; choose a new output directory");
    runtime::Console console;
    auto ds = data::build_dataset(*spec, *out, [&](const std::string& m) { console.info(m); });
    if (!ds) throw ExitError(exit_code(ds.status()), ds.status().message());
  });
}

}  // namespace crucible::cli
