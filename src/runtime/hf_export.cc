// `crucible export RUN --hf DIR` (runtime/hf_interchange.h).
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "ckpt/hf_model.h"
#include "ckpt/model_io.h"
#include "core/file_io.h"
#include "core/output_path.h"
#include "data/bpe_tokenizer.h"
#include "data/hf_tokenizer.h"
#include "data/tokenizer.h"
#include "runtime/hf_interchange.h"

namespace crucible::runtime {
namespace {

namespace fs = std::filesystem;

// The run's tokenizer as HF files in `dir`; its end-of-document id in *eos,
// its vocabulary size in *vocab.
Status write_tokenizer(const std::string& run_dir, int model_max_length, const std::string& dir,
                       int* eos, int* vocab) {
  if (fs::exists(run_dir + "/tokenizer.model")) {
    auto tok = data::Tokenizer::load(run_dir + "/tokenizer.model");
    if (!tok) return tok.status();
    auto files = data::sentencepiece_to_hf(*tok, model_max_length);
    if (!files) return files.status();
    CRUCIBLE_RETURN_IF_ERROR(write_file_atomic(dir + "/tokenizer.json", files->tokenizer_json));
    CRUCIBLE_RETURN_IF_ERROR(
        write_file_atomic(dir + "/tokenizer_config.json", files->tokenizer_config_json));
    CRUCIBLE_RETURN_IF_ERROR(
        write_file_atomic(dir + "/special_tokens_map.json", files->special_tokens_map_json));
    *eos = tok->eos_id();
    *vocab = tok->vocab_size();
    return Status::ok();
  }
  auto tok = data::BpeTokenizer::load(run_dir + "/vocab.json", run_dir + "/merges.txt");
  if (!tok)
    return Status::invalid(
        "[export] " + run_dir +
        " has no tokenizer.model and its byte-level BPE does not load: " + tok.status().message());
  CRUCIBLE_RETURN_IF_ERROR(tok->save(dir));
  const std::string eos_text = tok->token(tok->eos_id());
  nlohmann::json config = {{"tokenizer_class", "GPT2Tokenizer"},
                           {"model_max_length", model_max_length},
                           {"bos_token", eos_text},
                           {"eos_token", eos_text},
                           {"unk_token", eos_text},
                           {"add_prefix_space", false},
                           {"add_bos_token", false},
                           {"clean_up_tokenization_spaces", false},
                           // "<|endoftext|>" in a text is characters, as crucible encodes it.
                           {"split_special_tokens", true}};
  CRUCIBLE_RETURN_IF_ERROR(
      write_file_atomic(dir + "/tokenizer_config.json", config.dump(2) + "\n"));
  nlohmann::json special = {
      {"bos_token", eos_text}, {"eos_token", eos_text}, {"unk_token", eos_text}};
  CRUCIBLE_RETURN_IF_ERROR(
      write_file_atomic(dir + "/special_tokens_map.json", special.dump(2) + "\n"));
  *eos = tok->eos_id();
  *vocab = tok->vocab_size();
  return Status::ok();
}

}  // namespace

Status check_new_dir(const std::string& dir, const std::string& what) {
  CRUCIBLE_RETURN_IF_ERROR(check_output_dir(dir, what));
  std::error_code ec;
  if (fs::is_directory(dir, ec) && !fs::is_empty(dir, ec))
    return Status::invalid(what + " " + dir +
                           ": exists and is not empty (crucible writes a new directory)");
  return Status::ok();
}

Status write_new_dir(const std::string& dir, const std::string& what,
                     const std::function<Status(const std::string& tmp)>& fill) {
  std::string out = dir;
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  const std::string tmp = out + ".tmp." + std::to_string(::getpid());
  std::error_code ec;
  fs::remove_all(tmp, ec);
  if (!fs::create_directories(tmp, ec) && ec)
    return Status::io(what + " cannot create " + tmp + ": " + ec.message());
  Status s = fill(tmp);
  if (s) {
    if (fs::is_directory(out, ec)) fs::remove(out, ec);  // empty (check_new_dir)
    fs::rename(tmp, out, ec);
    if (ec) s = Status::io(what + " cannot rename " + tmp + " to " + out + ": " + ec.message());
  }
  if (s) s = fsync_dir(dir_of(out));
  if (!s) fs::remove_all(tmp, ec);
  return s;
}

Status export_hf_dir(const std::string& run_dir, const nn::GPTConfig& model,
                     const nn::ParamRegistry& params, const std::string& out_dir) {
  CRUCIBLE_RETURN_IF_ERROR(check_new_dir(out_dir, "[export] --hf"));
  return write_new_dir(out_dir, "[export]", [&](const std::string& tmp) -> Status {
    int eos = 0, vocab = 0;
    CRUCIBLE_RETURN_IF_ERROR(write_tokenizer(run_dir, model.seq_len, tmp, &eos, &vocab));
    if (vocab > model.vocab_size)
      return Status::invalid("[export] " + run_dir + ": the tokenizer has " + std::to_string(vocab) +
                             " tokens, more than model.vocab_size = " +
                             std::to_string(model.vocab_size));
    CRUCIBLE_RETURN_IF_ERROR(write_file_atomic(tmp + "/config.json",
                                               ckpt::hf_gpt2_config(model, eos).dump(2) + "\n"));
    CRUCIBLE_RETURN_IF_ERROR(write_file_atomic(
        tmp + "/generation_config.json",
        ckpt::hf_generation_config(eos, vocab, model.vocab_size).dump(2) + "\n"));
    // HF names and Conv1D layouts; the LM head is tied to wte and not stored.
    return ckpt::save_params(params, tmp + "/model.safetensors", false, {{"format", "pt"}});
  });
}

}  // namespace crucible::runtime
