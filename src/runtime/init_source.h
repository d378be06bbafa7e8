// Fine-tuning's starting point, the config key init.from (docs/training.md,
// "Fine-tuning"): a crucible run directory (the weights of its newest valid
// checkpoint, its tokenizer) or a Hugging Face GPT-2 directory (config.json,
// safetensors weights, GPT-2's byte-level BPE; runtime/hf_interchange.h).
//
// A fresh run reads the source's shape and tokenizer when it is planned
// (find_init_source, apply_init_source: nothing is written, so a bad source
// leaves no run directory), every rank loads the weights itself before the
// first step (load_init_weights, as every rank reads the checkpoint of a
// resume), and the run's checkpoints carry InitSource::record(), so a resume
// continues from the run's own checkpoints and never reads the source again.
// Only the weights are taken: AdamW's moments and the schedule start at step
// 0 with the run's own optim.* keys.
// Errors are one line starting "[init]" or "[config]" (Status::invalid or
// not_found: exit 2). Functions over files, no shared state; thread-compatible.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"
#include "data/text_tokenizer.h"
#include "nn/gpt.h"
#include "nn/params.h"
#include "runtime/config.h"

namespace crucible::runtime {

struct InitSource {
  std::string path;        // absolute, as init.from is written
  bool hf = false;         // a Hugging Face directory; else a crucible run
  std::string checkpoint;  // a run's step directory the weights come from
  nn::GPTConfig model;
  std::string tokenizer_dir;  // what data.tokenizer becomes
  int tokenizer_vocab = 0;
  uint64_t tokenizer_fingerprint = 0;
  // What identifies the weights: a run's checkpoint manifest checksum (it
  // covers every file's xxh64), an HF directory's ckpt::hf_weights_fingerprint.
  std::string weights_fingerprint;

  // The checkpoints' "init" member: {"from", "kind" ("run" | "huggingface"),
  // "checkpoint" (a run's), "fingerprint", "tokenizer_fingerprint"}; the
  // trainer adds "val_loss_before".
  nlohmann::json record() const;
  // "[init] weights from P (step_0000020, fingerprint F); optimizer and
  // schedule start at step 0".
  std::string describe() const;
};

// The log's line of a record with "val_loss_before": "[train] fine-tuned
// from P: validation loss A -> B", or with val_after < 0 "[init] validation
// loss before fine-tuning: A".
std::string finetune_summary(const nlohmann::json& record, double val_after);

// init.from as the config holds it: absolute and normalised ("" stays "").
std::string absolute_init_path(const std::string& from);

// Reads what init.from names, without its weights' values (an HF directory's
// files are hashed for the fingerprint). Refused: a path that is missing or
// not a directory, a directory that is neither kind, a run without a valid
// checkpoint, an HF directory import would refuse (another architecture, no
// safetensors...), a tokenizer larger than the model's vocabulary.
Result<InitSource> find_init_source(const std::string& from);

// What a fine-tuning run's resolved config (RUN/config.toml) says of its
// source: its init.from, model.*, data.tokenizer and data.vocab_size (no
// weights, no fingerprints), for apply_init_source on resume.
InitSource recorded_init_source(const Config& run_config);

// Sets what comes from the source: model.*, data.tokenizer and
// data.vocab_size. A value in the config file is replaced (a preset such as
// configs/tiny.toml names a shape for training from scratch); one given with
// --set (`overrides`) that differs is refused naming the key. An HF source
// needs the whole model on each rank (dist.tp = dist.pp = 1). Validates cfg.
Status apply_init_source(const InitSource& src, const std::vector<std::string>& overrides, Config& cfg);

// Loads the source's weights into `params` (part: a pipeline stage's or
// tensor-parallel shard's registry, from a run's checkpoint only).
Status load_init_weights(const InitSource& src, nn::ParamRegistry& params, bool part);

// The dataset's tokenizer must be the source's (a data.dataset given by hand
// may have been tokenized with another); `record` is InitSource::record().
Status check_init_tokenizer(const nlohmann::json& record, const data::TextTokenizer& tok,
                            const std::string& dataset_dir);

}  // namespace crucible::runtime
