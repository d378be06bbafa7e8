#include "runtime/inference_model.h"

#include <filesystem>

#include "ckpt/checkpoint.h"
#include "core/dtype.h"
#include "runtime/resume_check.h"

namespace crucible::runtime {

Result<InferenceModel> open_inference_model(const std::string& run_dir, const std::string& precision,
                                            const std::string& who) {
  if (!precision.empty() && precision != "fp32" && precision != "bf16")
    return Status::invalid(who + " --precision '" + precision + "' is not one of fp32, bf16");
  InferenceModel m;
  auto cfg = load_config(run_dir + "/config.toml");
  if (!cfg) return cfg.status();
  m.config = std::move(*cfg);
  m.precision = precision.empty() ? m.config.train.precision : precision;
  auto loaded = data::load_run_tokenizer(run_dir);
  if (!loaded) return loaded.status();
  m.tokenizer = std::move(*loaded);
  const data::TextTokenizer& tok = *m.tokenizer;
  if (tok.vocab_size() > m.config.model.vocab_size)
    return Status::invalid(who + " " + tok.path() + " has " + std::to_string(tok.vocab_size()) +
                           " tokens, more than model.vocab_size = " +
                           std::to_string(m.config.model.vocab_size));
  auto found = ckpt::find_latest_valid(run_dir + "/ckpt");
  if (!found) return found.status();
  m.warnings = found->warnings;
  if (!found->state.data.is_null()) {
    const std::string name = std::filesystem::path(found->dir).filename().string();
    auto pin = DataPin::from_json(found->state.data, found->dir + "/manifest.json");
    if (!pin) return pin.status();
    if (Status s = check_tokenizer_pin(*pin, tok.fingerprint(), tok.path(), name); !s) return s;
  }
  nn::GPTPart part = nn::GPTPart::whole(m.config.model);
  part.precision = dtype_named(m.precision);
  m.model = std::make_unique<nn::GPT>(m.config.model, part);
  auto state = ckpt::load_checkpoint(found->dir, m.model->params(), nullptr);
  if (!state) return state.status();
  m.checkpoint = found->dir;
  m.step = found->step;
  return m;
}

}  // namespace crucible::runtime
