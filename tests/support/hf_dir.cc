#include "support/hf_dir.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <utility>
#include <vector>

#include "ckpt/hf_model.h"
#include "ckpt/model_io.h"
#include "data/bpe_tokenizer.h"
#include "support/files.h"

namespace crucible::testutil {

void write_tiny_hf_dir(const std::string& dir, const nn::GPTConfig& model, uint64_t seed) {
  std::filesystem::create_directories(dir);
  nn::GPT gpt(model);
  gpt.init_weights(seed);
  ASSERT_TRUE(ckpt::save_params(gpt.params(), dir + "/model.safetensors", false, {{"format", "pt"}}).is_ok());
  write_file(dir + "/config.json", ckpt::hf_gpt2_config(model, 256).dump(2));
  std::vector<std::pair<std::string, int32_t>> vocab;
  for (int b = 0; b < 256; ++b) vocab.emplace_back(data::gpt2_byte_char(uint8_t(b)), b);
  vocab.emplace_back("<|endoftext|>", 256);
  auto tok = data::BpeTokenizer::from_parts(vocab, {}, "test");
  ASSERT_TRUE(tok.is_ok()) << tok.status().message();
  ASSERT_TRUE(tok->save(dir).is_ok());
}

}  // namespace crucible::testutil
