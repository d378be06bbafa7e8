// Tokenizers against Hugging Face, every id equal (needs the test venv,
// tests/hf/hf_venv.sh; "skipped" where it cannot be made):
//  - crucible's GPT-2 byte-level BPE (data/bpe_tokenizer.h) against HF
//    `tokenizers` on the same vocab/merges (trained by ByteLevelBPETokenizer),
//    read both from vocab.json + merges.txt and from tokenizer.json;
//  - crucible's SentencePiece model written as HF files
//    (data/hf_tokenizer.h) against AutoTokenizer.from_pretrained: ids and
//    the decoded text.
// Samples: every valid-UTF-8 fortunes document and 600 synthetic strings.
#include "data/hf_tokenizer.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "data/bpe_tokenizer.h"
#include "data/tokenizer.h"
#include "support/files.h"
#include "support/hf_texts.h"
#include "support/hf_venv.h"

namespace crucible {
namespace {

using testutil::TempDir;

std::vector<std::string> sample_texts(size_t fortunes_bytes) {
  std::vector<std::string> texts = testutil::fortunes_documents(fortunes_bytes);
  for (auto& s : testutil::unicode_samples(600)) texts.push_back(std::move(s));
  return texts;
}

// The first text whose ids differ, for the failure message.
template <typename Encode>
void expect_same_ids(const std::vector<std::string>& texts, const nlohmann::json& want,
                     Encode encode) {
  ASSERT_EQ(want.size(), texts.size());
  size_t differ = 0, ids = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::vector<int32_t> got = encode(texts[i]);
    const auto ref = want[i].get<std::vector<int32_t>>();
    ids += ref.size();
    if (got != ref && differ++ == 0)
      ADD_FAILURE() << "text " << i << " '" << texts[i].substr(0, 80) << "': " << got.size()
                    << " ids vs " << ref.size() << " from Hugging Face";
  }
  EXPECT_EQ(differ, 0u) << "of " << texts.size() << " texts";
  EXPECT_GT(ids, 100000u) << "the sample is meant to be large";
}

TEST(HfTokenizerParity, ByteLevelBpeEqualsHfTokenizers) {
  std::string why;
  const std::string py = testutil::hf_python(&why);
  if (py.empty()) GTEST_SKIP() << why;
  TempDir dir("bpe_parity");
  std::string out;
  ASSERT_EQ(testutil::run_hf_side(py, {"make-tokenizer", dir / "tok", "2000"}, &out), 0) << out;
  const std::vector<std::string> texts = sample_texts(SIZE_MAX);
  testutil::write_texts_json(dir / "texts.json", texts);
  ASSERT_EQ(
      testutil::run_hf_side(
          py, {"encode", dir / "tok/tokenizer.json", dir / "texts.json", dir / "ids.json"}, &out),
      0)
      << out;
  const nlohmann::json want = nlohmann::json::parse(testutil::read_file(dir / "ids.json"));
  auto files = data::BpeTokenizer::load(dir / "tok/vocab.json", dir / "tok/merges.txt");
  ASSERT_TRUE(files.is_ok()) << files.status().message();
  auto json = data::BpeTokenizer::load_tokenizer_json(dir / "tok/tokenizer.json");
  ASSERT_TRUE(json.is_ok()) << json.status().message();
  EXPECT_EQ(files->vocab_size(), 2000);
  EXPECT_EQ(json->fingerprint(), files->fingerprint()) << "the same tokenizer from either form";
  expect_same_ids(texts, want, [&](const std::string& s) { return files->encode(s); });
  expect_same_ids(texts, want, [&](const std::string& s) { return json->encode(s); });
  for (const auto& s : texts) ASSERT_EQ(files->decode(files->encode(s)), s);
}

TEST(HfTokenizerParity, SentencePieceAsAutoTokenizer) {
  std::string why;
  const std::string py = testutil::hf_python(&why);
  if (py.empty()) GTEST_SKIP() << why;
  TempDir dir("spm_parity");
  ASSERT_TRUE(
      data::Tokenizer::train(testutil::fortunes_documents(600'000), 1500, dir / "tokenizer.model")
          .is_ok());
  auto tok = data::Tokenizer::load(dir / "tokenizer.model");
  ASSERT_TRUE(tok.is_ok());
  auto files = data::sentencepiece_to_hf(*tok, 256);
  ASSERT_TRUE(files.is_ok()) << files.status().message();
  std::filesystem::create_directories(dir / "hf");
  testutil::write_file(dir / "hf/tokenizer.json", files->tokenizer_json);
  testutil::write_file(dir / "hf/tokenizer_config.json", files->tokenizer_config_json);
  testutil::write_file(dir / "hf/special_tokens_map.json", files->special_tokens_map_json);
  const std::vector<std::string> texts = sample_texts(SIZE_MAX);
  testutil::write_texts_json(dir / "texts.json", texts);
  std::string out;
  ASSERT_EQ(testutil::run_hf_side(
                py, {"auto-encode", dir / "hf", dir / "texts.json", dir / "out.json"}, &out),
            0)
      << out;
  const nlohmann::json got = nlohmann::json::parse(testutil::read_file(dir / "out.json"));
  expect_same_ids(texts, got["ids"], [&](const std::string& s) { return tok->encode(s); });
  size_t differ = 0;
  for (size_t i = 0; i < texts.size(); ++i)
    if (got["decoded"][i].get<std::string>() != texts[i] && differ++ == 0)
      ADD_FAILURE() << "AutoTokenizer decodes text " << i << " '" << texts[i].substr(0, 80)
                    << "' otherwise";
  EXPECT_EQ(differ, 0u);
}

}  // namespace
}  // namespace crucible
