// A Hugging Face GPT-2 model directory's weights and config, both ways:
// config.json <-> nn::GPTConfig, and the weights of GPT2LMHeadModel
// (model.safetensors, or shards listed by model.safetensors.index.json) into
// a GPT's ParamRegistry. Only what crucible's GPT computes exactly is
// accepted (docs/interchange.md): model_type gpt2, GELU tanh ("gelu_new"),
// LayerNorm eps 1e-5, an MLP of 4x width, tied LM head, attention scaled by
// 1/sqrt(head size) only. Pickle checkpoints (pytorch_model.bin) are never
// read. Errors are one line starting "[import]" naming the file and key or
// tensor (Status::invalid: exit 2). Pure functions; thread-safe.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "core/status.h"
#include "nn/gpt.h"
#include "nn/params.h"

namespace crucible::ckpt {

// config.json of `cfg` as GPT2LMHeadModel (n_positions = seq_len).
// eos/bos: the tokenizer's end-of-document id (GPT-2 uses it for both).
nlohmann::json hf_gpt2_config(const nn::GPTConfig& cfg, int eos_id);
// generation_config.json: transformers' defaults with the eos and bos ids,
// and the padded ids (tokenizer_vocab .. vocab_size - 1, rows of a padded
// embedding that no text stands for) suppressed, as crucible never samples them.
nlohmann::json hf_generation_config(int eos_id, int tokenizer_vocab, int vocab_size);

// dir/config.json as a GPTConfig; refuses what the GPT cannot compute.
Result<nn::GPTConfig> read_hf_gpt2_config(const std::string& dir);

// Loads every parameter of `params` (a whole GPT) from dir's safetensors
// weights: F32, BF16 or F16, named "transformer.*" or without the prefix (as
// the original GPT-2 upload), attention-mask buffers (attn.bias,
// attn.masked_bias) ignored, lm_head.weight accepted only when equal to wte.
// A missing tensor, a shape other than the config's, an unknown tensor, a
// non-finite value, or no safetensors file at all (pickle only) is an error.
Status load_hf_weights(const std::string& dir, nn::ParamRegistry& params);

// What identifies dir's weights: XXH64 of the XXH64s of its safetensors
// files (model.safetensors, or the index's shards in name order). Reads
// every byte; errors as load_hf_weights's when there are no weights.
Result<uint64_t> hf_weights_fingerprint(const std::string& dir);

}  // namespace crucible::ckpt
