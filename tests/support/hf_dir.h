// A Hugging Face GPT-2 directory written without Python, for tests of import
// and fine-tuning: a randomly initialised crucible GPT's weights under HF's
// names (model.safetensors), its config.json, and a byte-level BPE of the 256
// bytes and <|endoftext|> (vocab.json, merges.txt; no merges).
#pragma once
#include <cstdint>
#include <string>

#include "nn/gpt.h"

namespace crucible::testutil {

// 2 layers, 32 wide, context 16, vocab 300 (the tokenizer's 257 padded).
inline const nn::GPTConfig kTinyHfModel{2, 2, 32, 300, 16};

// Writes dir (created) as above, weights initialised from `seed`; gtest
// failures when a step fails.
void write_tiny_hf_dir(const std::string& dir, const nn::GPTConfig& model = kTinyHfModel, uint64_t seed = 11);

}  // namespace crucible::testutil
