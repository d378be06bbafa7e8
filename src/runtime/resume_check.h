// What makes a resumed run the same run (DESIGN.md, "Resume is the same run").
// A checkpoint pins the data it was trained on: the dataset directory, the
// checksums of its train and validation token shards and the tokenizer's
// fingerprint. A resume (by hand or a supervisor's restart) opens the pinned
// dataset, checks it is still that data, and refuses a run whose model shape
// differs from the checkpoint's, naming the key. `crucible generate` checks
// RUN/tokenizer.model against the pin. The checks are pure functions;
// find_resume_point reads the run's checkpoints.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include <optional>

#include "ckpt/checkpoint.h"
#include "core/status.h"
#include "runtime/config.h"

namespace crucible::runtime {

struct DataPin {
  std::string dataset;  // the dataset directory as the run opened it
  uint64_t train_xxh64 = 0, val_xxh64 = 0;  // the shards' payload checksums
  uint64_t tokenizer = 0;                   // Tokenizer::fingerprint()

  nlohmann::json to_json() const;
  // A manifest's "data" member; invalid when it is malformed. Checkpoints
  // written before pins existed have none (null): has_pin false.
  static Result<DataPin> from_json(const nlohmann::json& j, const std::string& where);
};

// Ok when `now` is the pinned data; else one line naming both, e.g.
// "[ckpt] step_0000020 was trained on data/curated-7001.../ (train.tok 1a2b...,
// tokenizer 3c4d...), this run opens data/other (train.tok 5e6f..., ...)".
Status check_data_pin(const DataPin& pinned, const DataPin& now, const std::string& ckpt_name);

// The tokenizer alone (generate): `fingerprint` of the tokenizer at `path`.
Status check_tokenizer_pin(const DataPin& pinned, uint64_t fingerprint, const std::string& path,
                           const std::string& ckpt_name);

// Keys a resumed run must share with its checkpoint (init.from, the model's shape):
// the first that differs, as "[config] model.n_layer: this run asks for 8,
// step_0000010 was trained with 4 (...)". `ckpt_config` is the manifest's
// "config" member (to_json of the run's Config).
Status check_resume_config(const nlohmann::json& ckpt_config, const Config& cfg,
                           const std::string& ckpt_name);

// A resumed run keeps its global batch (train.batch_size x train.grad_accum
// x data-parallel ranks): another changes what a step is in the middle of
// the run (the learning-rate schedule's steps, the tokens each one sees)
// without a word. The layout may change around it (another world size, an
// elastic fallback's fewer ranks with more accumulation). `ckpt_world` is the
// manifest's "world" member; a checkpoint that does not record its batch
// passes. One line naming the keys that changed and both global batches.
Status check_resume_batch(const nlohmann::json& ckpt_world, int64_t batch_size, int64_t grad_accum,
                          int64_t dp, const std::string& ckpt_name);

struct ResumePoint {
  ckpt::FoundCheckpoint checkpoint;  // the newest valid one
  std::optional<DataPin> pin;        // none in checkpoints of earlier versions
};

// The checkpoint a resume of run_dir continues, checked against cfg (the
// model's shape); cfg.data.dataset is pointed at the pinned dataset unless
// the run was given one explicitly (which the pin then checks).
// share: the ranks of the job that call this together (see ckpt::VerifyShare).
Result<ResumePoint> find_resume_point(Config& cfg, const std::string& run_dir,
                                      const ckpt::VerifyShare* share = nullptr);

}  // namespace crucible::runtime
