#include "runtime/train_setup.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "core/file_io.h"
#include "runtime/console.h"
#include "runtime/curate.h"
#include "runtime/world.h"

namespace crucible::runtime {

// The loss a model that ignores all context would reach on the shard at best.
double unigram_entropy(const data::TokenShard& shard, int vocab) {
  std::vector<uint64_t> counts(size_t(vocab), 0);
  for (size_t i = 0; i < shard.size(); ++i) ++counts[size_t(shard[i])];
  double h = 0, n = double(shard.size());
  for (uint64_t c : counts)
    if (c) h -= (double(c) / n) * std::log(double(c) / n);
  return h;
}

namespace {

Result<std::shared_ptr<const data::TokenShard>> open_shard(const std::string& path) {
  auto s = data::TokenShard::open(path);
  if (!s) return s.status();
  return std::shared_ptr<const data::TokenShard>(std::make_shared<data::TokenShard>(std::move(*s)));
}

}  // namespace

// curate.enabled: data.source is curated into cache_dir/curated-<plan
// fingerprint> first (reused while the inputs and settings are the same), and
// the dataset is built from the curated shards.
Status curate_sources(const Config& cfg, const data::LogFn& log, data::DatasetSpec* spec,
                      std::string* report_path) {
  auto cs = curate_spec(cfg, cfg.data.source, cfg.data.format);
  if (!cs) return cs.status();
  auto plan = data::plan_curation(*cs);
  if (!plan) return plan.status();
  CurateRequest req;
  req.inputs = cfg.data.source;
  req.format = cfg.data.format;
  req.out = cfg.data.cache_dir + "/curated-" + plan->fingerprint;
  req.cfg = cfg;
  req.lock_wait_s = cfg.fault.setup_timeout_s;  // another run building the same cache entry
  Console console;
  auto single = comm::make_single_comm();
  auto r = run_curate(req, *single, console);
  if (!r) return r.status();
  for (const auto& line : data::report_summary(r->report)) log("[curate] " + line);
  spec->sources = {req.out};
  spec->format = "jsonl";
  *report_path = req.out + "/report.json";
  return Status::ok();
}

// Data preparation: rank 0 builds (or finds) the cached dataset first, the
// other ranks then open it, so the tokenizer is trained once per job.
Status prepare_data(const Config& cfg, comm::Comm& comm, const data::LogFn& log, Setup& out) {
  const int vocab = cfg.data.vocab_size > 0 ? cfg.data.vocab_size : cfg.model.vocab_size;
  data::DatasetSpec spec{cfg.data.source, cfg.data.format, vocab, cfg.data.val_fraction,
                         cfg.data.tokenizer};
  auto open = [&]() -> Status {
    if (cfg.data.dataset.empty() && cfg.curate.enabled)
      CRUCIBLE_RETURN_IF_ERROR(curate_sources(cfg, log, &spec, &out.curation_report));
    auto ds = cfg.data.dataset.empty() ? data::cached_dataset(spec, cfg.data.cache_dir, log)
                                       : data::open_dataset(cfg.data.dataset);
    if (!ds) return ds.status();
    out.ds = std::move(*ds);
    return Status::ok();
  };
  if (comm.rank() == 0) CRUCIBLE_RETURN_IF_ERROR(agree(comm, open()));
  if (comm.rank() != 0) {
    CRUCIBLE_RETURN_IF_ERROR(agree(comm, Status::ok()));  // rank 0's build
    CRUCIBLE_RETURN_IF_ERROR(open());
  }
  auto tok = data::load_run_tokenizer(out.ds->dir);
  if (!tok) return tok.status();
  if ((*tok)->vocab_size() > cfg.model.vocab_size)
    return Status::invalid("[config] model.vocab_size: " + std::to_string(cfg.model.vocab_size) +
                           " is smaller than the tokenizer's " +
                           std::to_string((*tok)->vocab_size()) + " tokens");
  out.tok = std::move(*tok);
  auto train_shard = open_shard(out.ds->train_path());
  if (!train_shard) return train_shard.status();
  auto val_shard = open_shard(out.ds->val_path());
  if (!val_shard) return val_shard.status();
  out.train_shard = *train_shard;
  out.val_shard = *val_shard;
  for (const auto* shard : {out.train_shard.get(), out.val_shard.get()}) {
    // Its ids are below its header's vocab_size (checked on open); that must
    // fit the model's embedding.
    if (int64_t(shard->info().vocab_size) > int64_t(cfg.model.vocab_size))
      return Status::corrupt("[data] " + shard->path() + ": vocab_size " +
                             std::to_string(shard->info().vocab_size) +
                             " in its header exceeds model.vocab_size " + std::to_string(cfg.model.vocab_size));
    if (shard->info().tokenizer_fingerprint != out.tok->fingerprint())
      return Status::corrupt("[data] " + shard->path() + " was made by another tokenizer than " +
                             out.tok->path() + " (fingerprints differ)");
  }
  return Status::ok();
}

// Rank 0 creates the run directory (after the data is ready, so a bad corpus
// leaves nothing behind) and gives it the tokenizer, so `crucible generate
// RUN` needs nothing else.
Status prepare_run(const RunPlan& plan, const Setup& setup) {
  CRUCIBLE_RETURN_IF_ERROR(prepare_run_dir(plan));
  for (const std::string& f : setup.ds->tokenizer_files()) {
    auto bytes = read_file(f);
    if (!bytes) return bytes.status();
    CRUCIBLE_RETURN_IF_ERROR(write_file_atomic(
        plan.run_dir + "/" + std::filesystem::path(f).filename().string(), *bytes));
  }
  if (setup.curation_report.empty()) return Status::ok();
  std::ifstream rep(setup.curation_report, std::ios::binary);
  std::string report((std::istreambuf_iterator<char>(rep)), {});
  return write_file_atomic(plan.run_dir + "/curation.json", report);
}

}  // namespace crucible::runtime
