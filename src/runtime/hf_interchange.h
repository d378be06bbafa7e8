// Hugging Face interchange, both ways (docs/interchange.md; the directory
// layouts in docs/formats.md, "Hugging Face directories"):
//  - export: a run's weights, config and tokenizer as a GPT-2 directory that
//    transformers loads as is (config.json, model.safetensors,
//    generation_config.json, and the tokenizer: tokenizer.json for crucible's
//    SentencePiece model, vocab.json + merges.txt for a byte-level BPE);
//  - import: a GPT-2 directory (safetensors only, never pickle) into a run
//    directory that `crucible generate` and `crucible export` accept: its
//    resolved config.toml, the tokenizer (vocab.json + merges.txt) and a
//    checkpoint at step 0.
// Both write into DIR.tmp.PID and rename it to DIR at the end: on any error
// nothing is left at DIR. DIR must be absent or an empty directory. Errors are
// one line ("[export] ...", "[import] ..."), Status::invalid for bad input.
// Not thread-safe with respect to DIR (one writer per directory).
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "core/status.h"
#include "data/bpe_tokenizer.h"
#include "nn/gpt.h"
#include "nn/params.h"

namespace crucible::runtime {

// Writes `params` (the whole model `model`, loaded from a checkpoint of
// run_dir) and run_dir's tokenizer as the Hugging Face directory out_dir.
Status export_hf_dir(const std::string& run_dir, const nn::GPTConfig& model,
                     const nn::ParamRegistry& params, const std::string& out_dir);

struct ImportSummary {
  nn::GPTConfig model;
  int tokenizer_vocab = 0;
  std::string tokenizer_source;  // the file the tokenizer came from
  size_t params = 0;
};

// A GPT-2 directory's model shape and tokenizer, read and checked (the
// tokenizer fits the model's vocabulary), its weights not yet read
// (ckpt::load_hf_weights loads them into a GPT of `model`). What import
// writes as a run and fine-tuning (runtime/init_source.h) starts from.
struct HfModel {
  nn::GPTConfig model;
  data::BpeTokenizer tokenizer;
  std::string tokenizer_source;  // the file the tokenizer came from
};
Result<HfModel> read_hf_dir(const std::string& hf_dir);

// Reads the GPT-2 directory hf_dir into the new run directory run_dir.
Result<ImportSummary> import_hf_dir(const std::string& hf_dir, const std::string& run_dir);

// The check both make first: `dir` may be written (core/output_path.h) and is
// absent or an empty directory. `what` starts the message ("[export] --hf").
Status check_new_dir(const std::string& dir, const std::string& what);
// Fills DIR.tmp.PID with `fill(tmp)` and renames it to `dir` (replacing it
// when it is an empty directory); on any error the temporary is removed and
// nothing is left at `dir`. `what` ("[export]") starts the I/O messages.
Status write_new_dir(const std::string& dir, const std::string& what,
                     const std::function<Status(const std::string& tmp)>& fill);

}  // namespace crucible::runtime
