// A run opened for inference (`crucible generate`, `crucible serve`): its
// resolved config, its tokenizer (crucible's SentencePiece model or an
// imported GPT-2 byte-level BPE) and the whole model with the newest valid
// checkpoint's weights, in the precision asked for (checkpoints hold f32
// master weights: either precision runs from any run). The tokenizer must be
// the one the checkpoint was trained with (its data pin); another maps the
// same ids to other text. Errors are one line naming the file; `who` starts
// them ("[generate]").
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "data/text_tokenizer.h"
#include "nn/gpt.h"
#include "runtime/config.h"

namespace crucible::runtime {

struct InferenceModel {
  Config config;
  std::unique_ptr<data::TextTokenizer> tokenizer;
  std::unique_ptr<nn::GPT> model;
  std::string checkpoint;  // RUN/ckpt/step_NNNNNNN
  int64_t step = 0;
  std::string precision;               // fp32 | bf16
  std::vector<std::string> warnings;  // newer checkpoints skipped as invalid
};

// precision: "" = the run's train.precision, else fp32 | bf16.
Result<InferenceModel> open_inference_model(const std::string& run_dir, const std::string& precision,
                                            const std::string& who);

}  // namespace crucible::runtime
