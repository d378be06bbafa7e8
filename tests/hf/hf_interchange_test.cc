// crucible and transformers on the same models, as real processes (needs the
// test venv, tests/hf/hf_venv.sh; "skipped" where it cannot be made):
//  - a random GPT2LMHeadModel (2 layers, 64 wide, a byte-level BPE trained
//    by HF tokenizers) saved with save_pretrained -> `crucible import`:
//    crucible's logits on a batch equal transformers' (max error <= 1e-4 of
//    the largest logit), and `crucible generate --temperature 0` equals
//    transformers' greedy decode token for token (prompt ids included);
//  - a crucible run (8 steps of a tiny config, its embedding padded beyond
//    the tokenizer's vocabulary) -> `crucible export --hf`:
//    transformers loads it as is, its logits and greedy decode equal
//    crucible's, and AutoTokenizer gives crucible's ids;
//  - the imported run exported back: AutoTokenizer on it gives crucible's ids.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "ckpt/checkpoint.h"
#include "core/allocator.h"
#include "core/rng.h"
#include "data/text_tokenizer.h"
#include "nn/gpt.h"
#include "runtime/config.h"
#include "support/cli_runner.h"
#include "support/hf_texts.h"
#include "support/hf_venv.h"
#include "support/train_config.h"

namespace crucible {
namespace {

namespace fs = std::filesystem;
using e2e::run_crucible;
using testutil::TempDir;

#define HF_PYTHON_OR_SKIP(py)                            \
  std::string why_##py;                                  \
  const std::string py = testutil::hf_python(&why_##py); \
  if (py.empty()) GTEST_SKIP() << why_##py

// `crucible generate RUN --temperature 0 --print-ids`'s ids.
nlohmann::json crucible_greedy(const std::string& run, const std::string& prompt, int n) {
  auto r = run_crucible({"generate", run, "--prompt", prompt, "--temperature", "0", "--tokens",
                         std::to_string(n), "--print-ids"});
  EXPECT_EQ(r.code, 0) << r.output;
  const size_t at = r.output.find("[generate] ids ");
  if (at == std::string::npos) return {};
  return nlohmann::json::parse(r.output.substr(at + 15, r.output.find('\n', at) - at - 15));
}

nlohmann::json hf_greedy(const std::string& py, const std::string& dir, const std::string& prompt,
                         int n) {
  std::string out;
  EXPECT_EQ(testutil::run_hf_side(py, {"greedy", dir, prompt, std::to_string(n)}, &out), 0) << out;
  const size_t at = out.rfind("{\"prompt\"");
  if (at == std::string::npos) return {};
  return nlohmann::json::parse(out.substr(at));
}

// varied: the decode is not one token repeated (a random model's is not; a
// model trained for seconds often is, which still compares every step).
void expect_same_greedy(const nlohmann::json& c, const nlohmann::json& h, int n,
                        bool varied = true) {
  ASSERT_TRUE(c.is_object() && h.is_object()) << c << " / " << h;
  EXPECT_EQ(c["prompt"], h["prompt"]) << "the prompt's ids";
  EXPECT_EQ(c["new"].size(), size_t(n));
  EXPECT_EQ(c["new"], h["new"]) << "greedy tokens";
  // The comparison means something only if the decode is not one token repeated.
  std::set<int> distinct(h["new"].begin(), h["new"].end());
  if (varied) {
    EXPECT_GE(distinct.size(), 3u) << h["new"];
  }
}

// AutoTokenizer(dir)'s ids of a varied sample equal the run's tokenizer's.
void expect_auto_tokenizer_ids(const std::string& py, const std::string& dir,
                               const std::string& run, const TempDir& tmp) {
  auto tok = data::load_run_tokenizer(run);
  ASSERT_TRUE(tok.is_ok()) << tok.status().message();
  std::vector<std::string> texts = testutil::fortunes_documents(100'000);
  for (auto& s : testutil::unicode_samples(200)) texts.push_back(std::move(s));
  testutil::write_texts_json(tmp / "texts.json", texts);
  std::string out;
  ASSERT_EQ(
      testutil::run_hf_side(py, {"auto-encode", dir, tmp / "texts.json", tmp / "auto.json"}, &out),
      0)
      << out;
  const nlohmann::json got = nlohmann::json::parse(testutil::read_file(tmp / "auto.json"));
  size_t differ = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    if (got["ids"][i].get<std::vector<int32_t>>() != (*tok)->encode(texts[i]) && differ++ == 0)
      ADD_FAILURE() << "AutoTokenizer(" << dir << ") ids differ on '" << texts[i].substr(0, 60)
                    << "'";
    if (got["decoded"][i].get<std::string>() != texts[i] && differ++ == 0)
      ADD_FAILURE() << "AutoTokenizer(" << dir << ") decodes '" << texts[i].substr(0, 60)
                    << "' otherwise";
  }
  EXPECT_EQ(differ, 0u) << "of " << texts.size() << " texts";
}

// The run's newest checkpoint, in process, and transformers on hf_dir give
// the same logits for a random batch of B x T tokens (T: the context).
void expect_same_logits(const std::string& py, const std::string& hf_dir, const std::string& run,
                        const TempDir& tmp, int vocab) {
  std::string out;
  auto cfg = runtime::load_config(run + "/config.toml");
  ASSERT_TRUE(cfg.is_ok()) << cfg.status().message();
  ASSERT_EQ(cfg->model.vocab_size, vocab);
  nn::GPT gpt(cfg->model);
  auto found = ckpt::find_latest_valid(run + "/ckpt");
  ASSERT_TRUE(found.is_ok()) << found.status().message();
  ASSERT_TRUE(ckpt::load_checkpoint(found->dir, gpt.params(), nullptr).is_ok());
  const int B = 3, T = cfg->model.seq_len, V = cfg->model.vocab_size;
  std::vector<int32_t> tokens(size_t(B) * T);
  Rng rng(5, 1);
  for (auto& t : tokens) t = int32_t(rng.next_u32() % uint32_t(V));
  {
    std::ofstream f(tmp / "tokens.bin", std::ios::binary);
    f << nlohmann::json{{"B", B}, {"T", T}}.dump() << "\n";
    f.write(reinterpret_cast<const char*>(tokens.data()), std::streamsize(tokens.size() * 4));
  }
  ASSERT_EQ(
      testutil::run_hf_side(py, {"logits", hf_dir, tmp / "tokens.bin", tmp / "logits.f32"}, &out),
      0)
      << out;
  const std::string ref_bytes = testutil::read_file(tmp / "logits.f32");
  ASSERT_EQ(ref_bytes.size(), size_t(B) * T * V * 4);
  const float* ref = reinterpret_cast<const float*>(ref_bytes.data());
  Arena arena("hf.activations");
  gpt.forward(arena, tokens.data(), nullptr, B, T);
  double diff = 0, scale = 0;
  for (size_t i = 0; i < size_t(B) * T * V; ++i) {
    diff = std::max(diff, std::fabs(double(gpt.logits()[i]) - ref[i]));
    scale = std::max(scale, std::fabs(double(ref[i])));
  }
  EXPECT_LE(diff / scale, 1e-4) << "max |crucible - transformers| " << diff << " of " << scale;
  EXPECT_GT(scale, 0.5) << "logits large enough for the comparison to mean something";
}

TEST(HfInterchange, ImportedModelMatchesTransformers) {
  HF_PYTHON_OR_SKIP(py);
  TempDir tmp("hf_imported");
  std::string out;
  ASSERT_EQ(testutil::run_hf_side(py, {"make-model", tmp / "hf"}, &out), 0) << out;
  auto r = run_crucible({"import", tmp / "hf", "-o", tmp / "run"});
  ASSERT_EQ(r.code, 0) << r.output;

  ASSERT_NO_FATAL_FAILURE(expect_same_logits(py, tmp / "hf", tmp / "run", tmp, 1000));

  const int n = 40;
  expect_same_greedy(crucible_greedy(tmp / "run", "The cat sat on", n),
                     hf_greedy(py, tmp / "hf", "The cat sat on", n), n);

  // Exported back: AutoTokenizer of the byte-level files gives crucible's ids.
  r = run_crucible({"export", tmp / "run", "--hf", tmp / "back"});
  ASSERT_EQ(r.code, 0) << r.output;
  expect_auto_tokenizer_ids(py, tmp / "back", tmp / "run", tmp);
  expect_same_greedy(crucible_greedy(tmp / "run", "Hello,\n\tworld", n),
                     hf_greedy(py, tmp / "back", "Hello,\n\tworld", n), n);
}

TEST(HfInterchange, TrainedRunExportsToTransformers) {
  HF_PYTHON_OR_SKIP(py);
  TempDir tmp("hf_trained");
  testutil::SmallRun run = testutil::short_run();
  run.extra = "dir = \"" + tmp / "run" + "\"\n";
  const std::string cfg = testutil::write_small_config(tmp, run);
  // A tokenizer of 480 pieces under the model's 512 rows: the 32 padded ids
  // are never sampled by crucible, and suppressed in transformers by the
  // exported generation_config.json.
  auto r = run_crucible({"train", cfg, "--set", "data.vocab_size=480"});
  ASSERT_EQ(r.code, 0) << r.output;
  r = run_crucible({"export", tmp / "run", "--hf", tmp / "hf"});
  ASSERT_EQ(r.code, 0) << r.output;
  for (const char* f : {"config.json", "model.safetensors", "generation_config.json",
                        "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"})
    EXPECT_TRUE(fs::exists(tmp / "hf/" + f)) << f;
  // The context is 32: prompt and new tokens stay within it (transformers
  // cannot go past n_positions; crucible would slide its window).
  const int n = 24;
  for (const std::string prompt : {"A computer", "Real programmers  \t"})
    expect_same_greedy(crucible_greedy(tmp / "run", prompt, n),
                       hf_greedy(py, tmp / "hf", prompt, n), n, false);
  ASSERT_NO_FATAL_FAILURE(expect_same_logits(py, tmp / "hf", tmp / "run", tmp, 512));
  expect_auto_tokenizer_ids(py, tmp / "hf", tmp / "run", tmp);
}

}  // namespace
}  // namespace crucible
