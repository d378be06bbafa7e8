// `crucible import` and `crucible export --hf` as real processes, without
// Python: a GPT-2 directory written by crucible itself (its GPT's weights
// under HF names, config.json, a byte-level BPE of the 256 bytes and
// <|endoftext|>) imports, generates and exports; sharded safetensors import
// to the same weights; and every unsupported input ends with one "[import]"
// line naming it, exit 2, and nothing written.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "ckpt/checkpoint.h"
#include "ckpt/hf_model.h"
#include "ckpt/model_io.h"
#include "ckpt/safetensors.h"
#include "data/bpe_tokenizer.h"
#include "nn/gpt.h"
#include "support/cli_runner.h"
#include "support/hf_dir.h"

namespace crucible {
namespace {

namespace fs = std::filesystem;
using e2e::run_crucible;
using testutil::TempDir;

void write_hf_dir(const std::string& dir) { testutil::write_tiny_hf_dir(dir); }

void edit_config(const std::string& dir, const std::function<void(nlohmann::json&)>& edit) {
  nlohmann::json j = nlohmann::json::parse(testutil::read_file(dir + "/config.json"));
  edit(j);
  testutil::write_file(dir + "/config.json", j.dump(2));
}

// Rewrites model.safetensors keeping the tensors `keep` accepts.
void filter_weights(const std::string& dir, const std::function<bool(const std::string&)>& keep) {
  auto f = ckpt::read_safetensors(dir + "/model.safetensors");
  ASSERT_TRUE(f.is_ok());
  std::vector<ckpt::TensorView> views;
  for (const auto& [name, t] : f->tensors)
    if (keep(name)) views.push_back({name, t.dtype, t.shape, t.bytes.data()});
  ASSERT_TRUE(ckpt::write_safetensors(dir + "/model.safetensors", views).is_ok());
}

TEST(HfImport, ImportsGeneratesAndExportsBack) {
  TempDir tmp("hf_import_ok");
  ASSERT_NO_FATAL_FAILURE(write_hf_dir(tmp / "hf"));
  auto r = run_crucible({"import", tmp / "hf", "-o", tmp / "run"});
  ASSERT_EQ(r.code, 0) << r.output;
  for (const char* f :
       {"config.toml", "vocab.json", "merges.txt", "ckpt/step_0000000/manifest.json"})
    EXPECT_TRUE(fs::exists(tmp / "run/" + f)) << f;
  // Sampling never reaches the padded ids 257..299: no text stands for them.
  r = run_crucible({"generate", tmp / "run", "--prompt", "hello", "--tokens", "60", "--temperature",
                    "2", "--top-k", "0", "--print-ids"});
  ASSERT_EQ(r.code, 0) << r.output;
  const size_t at = r.output.find("[generate] ids ");
  ASSERT_NE(at, std::string::npos) << r.output;
  auto ids = nlohmann::json::parse(r.output.substr(at + 15, r.output.find('\n', at) - at - 15));
  EXPECT_EQ(ids["new"].size(), 60u);
  for (int id : ids["new"]) EXPECT_LT(id, 257);
  // Export back: the same tensors, bit for bit, and the same tokenizer files.
  r = run_crucible({"export", tmp / "run", "--hf", tmp / "back"});
  ASSERT_EQ(r.code, 0) << r.output;
  auto a = ckpt::read_safetensors(tmp / "hf/model.safetensors");
  auto b = ckpt::read_safetensors(tmp / "back/model.safetensors");
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  ASSERT_EQ(a->tensors.size(), b->tensors.size());
  for (const auto& [name, t] : a->tensors) {
    const ckpt::LoadedTensor* u = b->find(name);
    ASSERT_NE(u, nullptr) << name;
    EXPECT_EQ(u->shape, t.shape) << name;
    EXPECT_EQ(u->bytes, t.bytes) << name;
  }
  EXPECT_EQ(testutil::read_file(tmp / "back/vocab.json"),
            testutil::read_file(tmp / "run/vocab.json"));
  EXPECT_EQ(testutil::read_file(tmp / "back/merges.txt"),
            testutil::read_file(tmp / "run/merges.txt"));
  auto cfg = nlohmann::json::parse(testutil::read_file(tmp / "back/config.json"));
  EXPECT_EQ(cfg["n_positions"], 16);
  EXPECT_EQ(cfg["vocab_size"], 300);
  EXPECT_EQ(cfg["activation_function"], "gelu_new");
  // transformers never samples the padded ids 257..299 either.
  auto gen = nlohmann::json::parse(testutil::read_file(tmp / "back/generation_config.json"));
  ASSERT_EQ(gen["suppress_tokens"].size(), 43u);
  EXPECT_EQ(gen["suppress_tokens"][0], 257);
  EXPECT_EQ(gen["eos_token_id"], 256);
  // --hf into a directory that is not empty, or with -o or bf16: refused,
  // nothing written.
  r = run_crucible({"export", tmp / "run", "--hf", tmp / "back"});
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("[export] --hf"), std::string::npos) << r.output;
  r = run_crucible({"export", tmp / "run", "--hf", tmp / "x", "-o", tmp / "x.safetensors"});
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("exclusive"), std::string::npos) << r.output;
  r = run_crucible({"export", tmp / "run", "--hf", tmp / "x", "--dtype", "bf16"});
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_FALSE(fs::exists(tmp / "x"));
  EXPECT_FALSE(fs::exists(tmp / "x.safetensors"));
}

TEST(HfImport, ShardedSafetensorsGiveTheSameWeights) {
  TempDir tmp("hf_import_shards");
  ASSERT_NO_FATAL_FAILURE(write_hf_dir(tmp / "hf"));
  auto whole = ckpt::read_safetensors(tmp / "hf/model.safetensors");
  ASSERT_TRUE(whole.is_ok());
  // Two shards (names without the "transformer." prefix in the second, as the
  // original GPT-2 upload has them), an attention-mask buffer, a tied lm_head.
  std::vector<ckpt::TensorView> s1, s2;
  nlohmann::json map;
  std::vector<float> mask(16 * 16, 1.0f);
  for (const auto& [name, t] : whole->tensors) {
    const bool first = name.find(".h.1.") == std::string::npos;
    const std::string stored = first ? name : name.substr(std::string("transformer.").size());
    (first ? s1 : s2).push_back({stored, t.dtype, t.shape, t.bytes.data()});
    map[stored] = first ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
  }
  const ckpt::LoadedTensor& wte = *whole->find("transformer.wte.weight");
  s2.push_back({"lm_head.weight", "F32", wte.shape, wte.bytes.data()});
  s2.push_back({"h.1.attn.bias", "F32", {1, 1, 16, 16}, mask.data()});
  ASSERT_TRUE(ckpt::write_safetensors(tmp / "hf/model-00001-of-00002.safetensors", s1).is_ok());
  ASSERT_TRUE(ckpt::write_safetensors(tmp / "hf/model-00002-of-00002.safetensors", s2).is_ok());
  map["lm_head.weight"] = map["h.1.attn.bias"] = "model-00002-of-00002.safetensors";
  testutil::write_file(tmp / "hf/model.safetensors.index.json",
                       nlohmann::json{{"weight_map", map}}.dump());
  fs::remove(tmp / "hf/model.safetensors");
  auto r = run_crucible({"import", tmp / "hf", "-o", tmp / "run"});
  ASSERT_EQ(r.code, 0) << r.output;
  r = run_crucible({"export", tmp / "run", "--hf", tmp / "back"});
  ASSERT_EQ(r.code, 0) << r.output;
  auto back = ckpt::read_safetensors(tmp / "back/model.safetensors");
  ASSERT_TRUE(back.is_ok());
  for (const auto& [name, t] : whole->tensors) EXPECT_EQ(back->find(name)->bytes, t.bytes) << name;
}

// Fine-tuning: `crucible train RUN/config.toml --resume` on an imported run
// tokenizes its data with the imported byte-level BPE (data.tokenizer) and
// continues from step 0; generate and export read the result.
TEST(HfImport, FineTunesAnImportedRun) {
  TempDir tmp("hf_import_tune");
  ASSERT_NO_FATAL_FAILURE(write_hf_dir(tmp / "hf"));
  auto r = run_crucible({"import", tmp / "hf", "-o", tmp / "run"});
  ASSERT_EQ(r.code, 0) << r.output;
  r = run_crucible({"train", tmp / "run/config.toml", "--resume", "--set",
                    "data.source=[\"/usr/share/games/fortunes/computers\"]", "--set",
                    "data.cache_dir=" + tmp / "data", "--set", "curate.enabled=false", "--set",
                    "train.steps=6", "--set", "train.batch_size=2", "--set", "train.eval_every=0",
                    "--set", "train.threads=1", "--set", "ckpt.every=6"});
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("tokenizing with the tokenizer of"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("resumed from"), std::string::npos) << r.output;
  EXPECT_TRUE(fs::exists(tmp / "run/ckpt/step_0000006/manifest.json")) << r.output;
  EXPECT_FALSE(fs::exists(tmp / "run/tokenizer.model")) << "the run keeps its byte-level BPE";
  // The dataset's shards hold the imported tokenizer's ids (the bytes, 0..255, and eos 256).
  std::string ds;
  for (const auto& e : fs::directory_iterator(tmp / "data"))
    if (fs::exists(e.path() / "vocab.json")) ds = e.path().string();
  ASSERT_FALSE(ds.empty());
  EXPECT_EQ(testutil::read_file(ds + "/vocab.json"), testutil::read_file(tmp / "run/vocab.json"));
  r = run_crucible({"generate", tmp / "run", "--prompt", "The ", "--tokens", "8"});
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("step_0000006"), std::string::npos) << r.output;
  r = run_crucible({"export", tmp / "run", "--hf", tmp / "tuned"});
  EXPECT_EQ(r.code, 0) << r.output;
  auto tuned = ckpt::read_safetensors(tmp / "tuned/model.safetensors");
  auto orig = ckpt::read_safetensors(tmp / "hf/model.safetensors");
  ASSERT_TRUE(tuned.is_ok() && orig.is_ok());
  EXPECT_NE(tuned->find("transformer.h.0.mlp.c_fc.weight")->bytes,
            orig->find("transformer.h.0.mlp.c_fc.weight")->bytes)
      << "training changed the weights";
}

struct Refusal {
  const char* what;  // in the message
  std::function<void(const std::string& dir)> damage;
};

TEST(HfImport, RefusesWhatItCannotRunWithOneLine) {
  auto config = [](std::function<void(nlohmann::json&)> e) {
    return [e](const std::string& d) { edit_config(d, e); };
  };
  const std::vector<Refusal> cases = {
      {"model_type", config([](nlohmann::json& j) { j["model_type"] = "llama"; })},
      {"architectures",
       config([](nlohmann::json& j) { j["architectures"] = {"GPT2ForSequenceClassification"}; })},
      {"activation_function", config([](nlohmann::json& j) { j["activation_function"] = "relu"; })},
      {"layer_norm_epsilon", config([](nlohmann::json& j) { j["layer_norm_epsilon"] = 1e-6; })},
      {"n_inner", config([](nlohmann::json& j) { j["n_inner"] = 100; })},
      {"tie_word_embeddings", config([](nlohmann::json& j) { j["tie_word_embeddings"] = false; })},
      {"n_head", config([](nlohmann::json& j) { j.erase("n_head"); })},
      {"wpe.weight is [16,32], config.json makes it [20,32]",
       config([](nlohmann::json& j) { j["n_positions"] = 20; })},
      {"transformer.ln_f.bias is missing",
       [](const std::string& d) {
         filter_weights(d, [](const std::string& n) { return n != "transformer.ln_f.bias"; });
       }},
      {"pickle",
       [](const std::string& d) {
         fs::remove(d + "/model.safetensors");
         testutil::write_file(d + "/pytorch_model.bin", "PK\x03\x04");
       }},
      {"merges.txt",
       [](const std::string& d) { testutil::write_file(d + "/merges.txt", "a b c\n"); }},
      {"no tokenizer",
       [](const std::string& d) {
         fs::remove(d + "/vocab.json");
         fs::remove(d + "/merges.txt");
       }},
      {"SentencePiece",
       [](const std::string& d) {
         fs::remove(d + "/vocab.json");
         testutil::write_file(d + "/tokenizer.model", "x");
       }},
      {"model.safetensors",
       [](const std::string& d) { testutil::write_file(d + "/model.safetensors", "garbage"); }},
  };
  TempDir tmp("hf_import_refusals");
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string hf = tmp / ("hf" + std::to_string(i)),
                      run = tmp / ("run" + std::to_string(i));
    ASSERT_NO_FATAL_FAILURE(write_hf_dir(hf));
    cases[i].damage(hf);
    auto r = run_crucible({"import", hf, "-o", run});
    EXPECT_EQ(r.code, 2) << cases[i].what << ": " << r.output;
    EXPECT_EQ(r.output.rfind("[import] ", 0), 0u) << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
    EXPECT_NE(r.output.find(cases[i].what), std::string::npos) << r.output;
    EXPECT_FALSE(fs::exists(run)) << cases[i].what;
    for (const auto& e : fs::directory_iterator(tmp.path()))
      EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
  }
  // A run directory that is not empty is never written into.
  ASSERT_NO_FATAL_FAILURE(write_hf_dir(tmp / "good"));
  fs::create_directories(tmp / "busy");
  testutil::write_file(tmp / "busy/keep.txt", "mine");
  auto r = run_crucible({"import", tmp / "good", "-o", tmp / "busy"});
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("not empty"), std::string::npos) << r.output;
  EXPECT_EQ(testutil::read_file(tmp / "busy/keep.txt"), "mine");
}

}  // namespace
}  // namespace crucible
