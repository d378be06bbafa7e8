#include "runtime/init_source.h"

#include <cstdio>
#include <filesystem>

#include "ckpt/checkpoint.h"
#include "ckpt/hf_model.h"
#include "core/hash.h"
#include "core/json_io.h"
#include "runtime/config_schema.h"
#include "runtime/hf_interchange.h"

namespace crucible::runtime {

namespace fs = std::filesystem;

namespace {

// "[import] x" or "[ckpt] x" of the readers below as "[init] init.from P: x".
Status as_init(const std::string& from, const Status& s) {
  std::string m = s.message();
  if (const size_t tag = m.find("] "); m.rfind('[', 0) == 0 && tag != std::string::npos) m.erase(0, tag + 2);
  return Status::error(s.code(), "[init] init.from " + from + ": " + m);
}

Status check_vocab(const InitSource& src) {
  if (src.tokenizer_vocab <= src.model.vocab_size) return Status::ok();
  return Status::invalid("[init] init.from " + src.path + ": its tokenizer has " +
                         std::to_string(src.tokenizer_vocab) + " tokens, more than the model's vocab_size " +
                         std::to_string(src.model.vocab_size));
}

Result<InitSource> read_hf_source(InitSource src) {
  auto hf = read_hf_dir(src.path);
  if (!hf) return as_init(src.path, hf.status());
  // The dataset is tokenized from a directory holding vocab.json + merges.txt
  // (data.tokenizer); a tokenizer.json alone is converted by import.
  if (!fs::exists(src.path + "/vocab.json") || !fs::exists(src.path + "/merges.txt"))
    return Status::invalid("[init] init.from " + src.path +
                           ": its tokenizer is tokenizer.json only; `crucible import " + src.path +
                           " -o RUN` converts it, then set init.from=RUN");
  auto fp = ckpt::hf_weights_fingerprint(src.path);
  if (!fp) return as_init(src.path, fp.status());
  src.hf = true;
  src.model = hf->model;
  src.tokenizer_dir = src.path;
  src.tokenizer_vocab = hf->tokenizer.vocab_size();
  src.tokenizer_fingerprint = hf->tokenizer.fingerprint();
  src.weights_fingerprint = hex64(*fp);
  return src;
}

Result<InitSource> read_run_source(InitSource src) {
  auto found = ckpt::find_latest_valid(src.path + "/ckpt");
  if (!found) return as_init(src.path, found.status());
  const nlohmann::json& model = json_object_or_null(found->state.config, "model");
  for (const char* k : {"n_layer", "n_head", "n_embd", "vocab_size", "seq_len"})
    if (!model.is_object() || !model.contains(k) || !model[k].is_number_integer())
      return Status::corrupt("[init] init.from " + found->dir + "/manifest.json: no model." + k);
  src.model.n_layer = model["n_layer"].get<int>();
  src.model.n_head = model["n_head"].get<int>();
  src.model.n_embd = model["n_embd"].get<int>();
  src.model.vocab_size = model["vocab_size"].get<int>();
  src.model.seq_len = model["seq_len"].get<int>();
  auto manifest = read_json(found->dir + "/manifest.json");
  if (!manifest) return as_init(src.path, manifest.status());
  auto tok = data::load_run_tokenizer(src.path);
  if (!tok) return as_init(src.path, tok.status());
  src.checkpoint = found->dir;
  src.tokenizer_dir = src.path;
  src.tokenizer_vocab = (*tok)->vocab_size();
  src.tokenizer_fingerprint = (*tok)->fingerprint();
  src.weights_fingerprint = json_string_or(*manifest, ckpt::kManifestChecksumKey, "");
  return src;
}

// The key of a "--set key=value".
std::string override_key(const std::string& text) { return text.substr(0, text.find('=')); }

// The value at "section.key" of a config's JSON.
const nlohmann::json& at_key(const nlohmann::json& j, const std::string& key) {
  const size_t dot = key.find('.');
  return j[key.substr(0, dot)][key.substr(dot + 1)];
}

}  // namespace

nlohmann::json InitSource::record() const {
  nlohmann::json r = {{"from", path},
                      {"kind", hf ? "huggingface" : "run"},
                      {"fingerprint", weights_fingerprint},
                      {"tokenizer_fingerprint", hex64(tokenizer_fingerprint)}};
  if (!hf) r["checkpoint"] = fs::path(checkpoint).filename().string();
  return r;
}

std::string InitSource::describe() const {
  return "[init] weights from " + path + " (" + (hf ? "Hugging Face" : fs::path(checkpoint).filename().string()) +
         ", fingerprint " + weights_fingerprint + "); optimizer and schedule start at step 0";
}

std::string finetune_summary(const nlohmann::json& record, double val_after) {
  char line[96];
  const double before = record.value("val_loss_before", -1.0);
  if (val_after < 0) {
    std::snprintf(line, sizeof line, "%.4f", before);
    return std::string("[init] validation loss before fine-tuning: ") + line;
  }
  std::snprintf(line, sizeof line, "%.4f -> %.4f", before, val_after);
  return "[train] fine-tuned from " + record.value("from", std::string("?")) + ": validation loss " + line;
}

std::string absolute_init_path(const std::string& from) {
  if (from.empty()) return from;
  std::string abs = fs::absolute(from).lexically_normal().string();
  while (abs.size() > 1 && abs.back() == '/') abs.pop_back();
  return abs;
}

Result<InitSource> find_init_source(const std::string& from) {
  InitSource src;
  src.path = absolute_init_path(from);
  std::error_code ec;
  if (!fs::exists(src.path, ec)) return Status::not_found("[init] init.from " + src.path + ": no such directory");
  if (!fs::is_directory(src.path, ec))
    return Status::invalid("[init] init.from " + src.path +
                           ": not a directory (a crucible run or a Hugging Face GPT-2 directory)");
  Result<InitSource> read = fs::exists(src.path + "/config.json") ? read_hf_source(src)
                            : fs::exists(src.path + "/ckpt") || fs::exists(src.path + "/config.toml")
                                ? read_run_source(src)
                                : Result<InitSource>(Status::invalid(
                                      "[init] init.from " + src.path +
                                      ": neither a crucible run (config.toml, ckpt/) nor a Hugging Face "
                                      "GPT-2 directory (config.json)"));
  if (!read) return read.status();
  CRUCIBLE_RETURN_IF_ERROR(check_vocab(*read));
  return read;
}

InitSource recorded_init_source(const Config& run_config) {
  InitSource src;
  src.path = run_config.init.from;
  src.model = run_config.model;
  src.tokenizer_dir = run_config.data.tokenizer;
  src.tokenizer_vocab = run_config.data.vocab_size;
  return src;
}

Status apply_init_source(const InitSource& src, const std::vector<std::string>& overrides, Config& cfg) {
  Config want = cfg;
  want.model = src.model;
  want.data.tokenizer = src.tokenizer_dir;
  want.data.vocab_size = src.tokenizer_vocab;
  const nlohmann::json given = to_json(cfg), taken = to_json(want);
  for (const std::string& o : overrides) {
    const std::string key = override_key(o);
    const bool from_source = key.rfind("model.", 0) == 0 || key == "data.tokenizer" || key == "data.vocab_size";
    if (from_source && given.contains(key.substr(0, key.find('.'))) && at_key(given, key) != at_key(taken, key))
      return schema::bad(key, "--set gives " + at_key(given, key).dump() + ", init.from " + src.path + " has " +
                                  at_key(taken, key).dump() +
                                  " (a fine-tuned model keeps its source's shape and tokenizer; drop the --set)");
  }
  if (src.hf && (cfg.dist.tp > 1 || cfg.dist.pp > 1))
    return schema::bad("init.from", src.path +
                                        " is a Hugging Face directory, read whole on every rank: with dist.tp or "
                                        "dist.pp > 1 import it first (crucible import DIR -o RUN; init.from=RUN)");
  cfg.model = want.model;
  cfg.data.tokenizer = want.data.tokenizer;
  cfg.data.vocab_size = want.data.vocab_size;
  return validate(cfg);
}

Status load_init_weights(const InitSource& src, nn::ParamRegistry& params, bool part) {
  Status s = src.hf ? ckpt::load_hf_weights(src.path, params)
                    : ckpt::load_checkpoint(src.checkpoint, params, nullptr, part).status();
  return s ? s : as_init(src.path, s);
}

Status check_init_tokenizer(const nlohmann::json& record, const data::TextTokenizer& tok,
                            const std::string& dataset_dir) {
  const std::string want = json_string_or(record, "tokenizer_fingerprint", "");
  if (want.empty() || want == hex64(tok.fingerprint())) return Status::ok();
  return Status::invalid("[init] data.dataset " + dataset_dir + " was tokenized with " + tok.path() +
                         " (fingerprint " + hex64(tok.fingerprint()) + "), not init.from " +
                         json_string_or(record, "from", "?") + "'s tokenizer (" + want +
                         "); drop data.dataset to tokenize data.source with it");
}

}  // namespace crucible::runtime
