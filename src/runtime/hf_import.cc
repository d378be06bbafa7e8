// `crucible import HF_DIR -o RUN` (runtime/hf_interchange.h): a Hugging Face
// GPT-2 directory into a run directory at step 0.
#include <filesystem>
#include <nlohmann/json.hpp>

#include "ckpt/checkpoint.h"
#include "ckpt/hf_model.h"
#include "core/file_io.h"
#include "data/bpe_tokenizer.h"
#include "optim/adamw.h"
#include "runtime/config.h"
#include "runtime/hf_interchange.h"

namespace crucible::runtime {
namespace {

namespace fs = std::filesystem;

// The data layer's "[data] ..." error as import's.
Status as_import(const Status& s) {
  std::string m = s.message();
  if (m.rfind("[data] ", 0) == 0) m.erase(0, 7);
  return Status::error(s.code(), "[import] " + m);
}

// GPT-2's byte-level BPE from vocab.json + merges.txt, else tokenizer.json.
Result<data::BpeTokenizer> read_tokenizer(const std::string& dir, std::string* source) {
  if (fs::exists(dir + "/vocab.json") && fs::exists(dir + "/merges.txt")) {
    *source = dir + "/vocab.json";
    auto t = data::BpeTokenizer::load(dir + "/vocab.json", dir + "/merges.txt");
    if (!t) return as_import(t.status());
    return t;
  }
  if (fs::exists(dir + "/tokenizer.json")) {
    *source = dir + "/tokenizer.json";
    auto t = data::BpeTokenizer::load_tokenizer_json(dir + "/tokenizer.json");
    if (!t) return as_import(t.status());
    return t;
  }
  if (fs::exists(dir + "/tokenizer.model"))
    return Status::invalid("[import] " + dir +
                           " holds a SentencePiece tokenizer.model: only GPT-2's byte-level BPE "
                           "(vocab.json + merges.txt, or tokenizer.json) is imported");
  return Status::invalid("[import] " + dir +
                         ": no tokenizer (vocab.json + merges.txt, or tokenizer.json)");
}

// The run's resolved config: the default's training settings around the
// imported model; data.tokenizer is the run directory itself (its vocab.json
// and merges.txt), so `crucible train RUN/config.toml --resume` fine-tunes
// on data tokenized with the imported tokenizer. Paths are absolute: the
// config is read from wherever the user starts.
Result<Config> run_config(const nn::GPTConfig& model, int tokenizer_vocab,
                          const std::string& run_dir) {
  auto cfg = load_config("");
  if (!cfg) return cfg.status();
  cfg->model = model;
  cfg->data.vocab_size = tokenizer_vocab;
  cfg->run.name = "import";
  std::string abs = fs::absolute(run_dir).lexically_normal().string();
  while (abs.size() > 1 && abs.back() == '/') abs.pop_back();
  cfg->run.dir = abs;
  cfg->data.tokenizer = abs;
  cfg->run.sample_tokens = 0;
  CRUCIBLE_RETURN_IF_ERROR(resolve_config(*cfg));
  CRUCIBLE_RETURN_IF_ERROR(validate(*cfg));
  return cfg;
}

}  // namespace

Result<HfModel> read_hf_dir(const std::string& hf_dir) {
  if (!fs::is_directory(hf_dir)) return Status::invalid("[import] " + hf_dir + ": not a directory");
  auto model = ckpt::read_hf_gpt2_config(hf_dir);
  if (!model) return model.status();
  std::string source;
  auto tok = read_tokenizer(hf_dir, &source);
  if (!tok) return tok.status();
  if (tok->vocab_size() > model->vocab_size)
    return Status::invalid("[import] " + source + ": " + std::to_string(tok->vocab_size()) +
                           " tokens, more than config.json's vocab_size " + std::to_string(model->vocab_size));
  return HfModel{*model, std::move(*tok), source};
}

Result<ImportSummary> import_hf_dir(const std::string& hf_dir, const std::string& run_dir) {
  if (!fs::is_directory(hf_dir)) return Status::invalid("[import] " + hf_dir + ": not a directory");
  CRUCIBLE_RETURN_IF_ERROR(check_new_dir(run_dir, "[import] -o"));
  auto hf = read_hf_dir(hf_dir);
  if (!hf) return hf.status();
  const nn::GPTConfig* model = &hf->model;
  const data::BpeTokenizer* tok = &hf->tokenizer;
  ImportSummary sum;
  sum.model = *model;
  sum.tokenizer_source = hf->tokenizer_source;
  sum.tokenizer_vocab = tok->vocab_size();
  auto cfg = run_config(*model, tok->vocab_size(), run_dir);
  if (!cfg) return cfg.status();
  // Step 0 in the normal checkpoint format: the weights, zero AdamW moments
  // (no optimizer is built: its moments would be a second copy of zeros),
  // no data pin and no loader position (no dataset has been seen). The model
  // is gone before the moments are made: the peak is about three copies of
  // the weights, not seven.
  ckpt::Snapshot snap;
  {
    nn::GPT gpt(*model);
    CRUCIBLE_RETURN_IF_ERROR(ckpt::load_hf_weights(hf_dir, gpt.params()));
    const nn::ParamRegistry& P = gpt.params();
    snap.specs = P.specs();
    snap.params.assign(P.values(), P.values() + P.numel());
  }
  sum.params = snap.params.size();
  snap.moment_ranges = {optim::Range{0, snap.params.size()}};
  snap.exp_avg.assign(snap.params.size(), 0.0f);
  snap.exp_avg_sq.assign(snap.params.size(), 0.0f);
  snap.state.step = 0;
  snap.state.config = to_json(*cfg);
  snap.state.rng = {{"seed", cfg->train.seed}, {"init_streams", "fnv1a64(param name)"}};
  snap.state.world = {{"world_size", 1}};

  Status s = write_new_dir(run_dir, "[import]", [&](const std::string& tmp) -> Status {
    CRUCIBLE_RETURN_IF_ERROR(write_file_atomic(tmp + "/config.toml", to_toml(*cfg)));
    CRUCIBLE_RETURN_IF_ERROR(tok->save(tmp));
    const nlohmann::json origin = {{"hf_dir", fs::absolute(hf_dir).lexically_normal().string()},
                                   {"tokenizer", sum.tokenizer_source}};
    CRUCIBLE_RETURN_IF_ERROR(write_file_atomic(tmp + "/imported.json", origin.dump(2) + "\n"));
    return ckpt::write_checkpoint(tmp + "/ckpt", snap, 1);
  });
  if (!s) return s;
  return sum;
}

}  // namespace crucible::runtime
