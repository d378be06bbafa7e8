// `crucible curate IN... -o OUT [--config FILE] [--set k=v]... [--dry-run] [--tokenize]`
// (runtime/curate.h; docs/curation.md).
#include <cstdio>
#include <filesystem>
#include <memory>

#include "cli/commands.h"
#include "core/output_path.h"
#include "data/dataset.h"
#include "comm/comm.h"
#include "profile/report.h"
#include "runtime/console.h"
#include "runtime/curate.h"
#include "runtime/world.h"

namespace crucible::cli {
namespace {

struct CurateCli {
  runtime::CurateRequest req;
  std::string config;
  std::vector<std::string> overrides;
  int threads = 0;
  bool tokenize = false;
  int vocab_size = 8192;
  double val_fraction = 0.05;
};

void run(CurateCli& c) {
  if (Status s = check_output_dir(c.req.out, "[curate] -o"); !s) throw ExitError(2, s.message());
  auto cfg = runtime::load_config(c.config, c.overrides);
  if (!cfg) throw ExitError(exit_code(cfg.status()), cfg.status().message());
  c.req.cfg = *cfg;
  if (c.threads > 0) c.req.cfg.curate.threads = c.threads;
  auto world = comm::world();
  if (!world) throw ExitError(1, world.status().message());
  comm::Comm& comm = **world;
  runtime::Console console;
  console.set_quiet(comm.rank() != 0);
  auto r = runtime::run_curate(c.req, comm, console);
  if (!r) throw ExitError(exit_code(r.status()), comm.rank() == 0 ? r.status().message() : "");
  if (c.req.dry_run) return;
  Status s;
  const std::string out = c.req.out;
  if (comm.rank() == 0) {
    for (const auto& line : data::report_summary(r->report)) console.info("[curate] " + line);
    s = profile::write_report(out, out + "/report.html");
    if (s.is_ok()) console.info("[curate] wrote " + out + "/report.json, report.html and " +
                             std::to_string(r->report["shards"].size()) + " shard(s)");
    const std::string tokens = out + "/tokens";
    if (s.is_ok() && c.tokenize && !std::filesystem::exists(tokens)) {
      data::DatasetSpec spec{{out}, "jsonl", c.vocab_size, c.val_fraction, {}};
      auto ds = data::build_dataset(spec, tokens, [&](const std::string& m) { console.info(m); });
      s = ds.status();
      if (ds) console.info("[curate] token shards for `crucible train --set data.dataset=" + tokens + "`");
    }
  }
  s = runtime::agree(comm, s);
  if (!s.is_ok()) throw ExitError(exit_code(s), comm.rank() == 0 ? s.message() : "");
}

}  // namespace

void add_curate_command(CLI::App& app) {
  auto c = std::make_shared<CurateCli>();
  auto* cmd = app.add_subcommand(
      "curate",
      "Clean, deduplicate (exact and MinHash LSH) and quality-filter a corpus into JSONL shards, "
      "with report.json/report.html of what each stage removed (under launch -n N: split over ranks)");
  cmd->add_option("inputs", c->req.inputs, "Corpus files or directories (text, JSONL, fortunes)")
      ->required();
  cmd->add_option("-o,--output", c->req.out, "Output directory (created; an unfinished one resumes)")
      ->required();
  cmd->add_option("--config", c->config,
                  "TOML config whose [curate] [quality] [repetition] [c4] [near] sections apply");
  cmd->add_option("--set", c->overrides, "Override a config key: section.key=value (repeatable)");
  cmd->add_option("--format", c->req.format, "auto | fortunes | text | jsonl")->capture_default_str();
  cmd->add_option("--threads", c->threads, "Threads per rank (default: all cores)")
      ->check(positive());
  cmd->add_flag("--dry-run", c->req.dry_run, "Print the plan and the memory and disk it needs; write nothing");
  cmd->add_flag("--tokenize", c->tokenize,
                "Also train a tokenizer and write token shards to OUT/tokens (for data.dataset)");
  cmd->add_option("--vocab-size", c->vocab_size, "Tokenizer vocabulary size (--tokenize)")
      ->capture_default_str()
      ->check(integer_in(260, 1 << 20));
  cmd->add_option("--val-fraction", c->val_fraction, "Share of tokens held out (--tokenize)")
      ->capture_default_str()
      ->check(number_in(0.001, 0.5));
  cmd->add_option("--kill-after", c->req.kill_after,
                  "Test facility: SIGKILL this process after N units of PASS (scan|dedup|output)")
      ->group("Testing");
  cmd->callback([c] { run(*c); });
}

}  // namespace crucible::cli
