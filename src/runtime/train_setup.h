// What a training process prepares before its first step: the dataset (built
// once per job by rank 0, then opened by every rank), the tokenizer, the token
// shards (checked to belong to that tokenizer), and the run directory.
#pragma once
#include <memory>
#include <optional>
#include <string>

#include "comm/comm.h"
#include "core/status.h"
#include "data/dataset.h"
#include "data/shard.h"
#include "data/text_tokenizer.h"
#include "runtime/config.h"
#include "runtime/run_dir.h"

namespace crucible::runtime {

struct Setup {
  std::optional<data::Dataset> ds;
  std::unique_ptr<data::TextTokenizer> tok;  // the dataset's (either kind)
  std::shared_ptr<const data::TokenShard> train_shard, val_shard;
  // report.json of the curation that prepared the data (curate.enabled), for RUN/curation.json.
  std::string curation_report;
};

// Collective over comm (see runtime/world.h): every rank calls it.
Status prepare_data(const Config& cfg, comm::Comm& comm, const data::LogFn& log, Setup& out);
// Rank 0 only: creates the run directory and copies the tokenizer's files (and the
// curation report) into it.
Status prepare_run(const RunPlan& plan, const Setup& setup);
// Entropy (nats) of the unigram distribution of a shard's tokens.
double unigram_entropy(const data::TokenShard& shard, int vocab);

}  // namespace crucible::runtime
