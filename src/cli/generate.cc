// `crucible generate RUN`: samples text from the newest valid checkpoint of a
// run, with a KV cache (nn/generator.h), streaming tokens to stdout.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>

#include "ckpt/checkpoint.h"
#include "cli/commands.h"
#include "core/rng.h"
#include "data/text_tokenizer.h"
#include "nn/generator.h"
#include "nn/gpt.h"
#include "runtime/config.h"
#include "runtime/resume_check.h"

namespace crucible::cli {

namespace {

struct GenerateOptions {
  std::string run_dir, prompt;
  int tokens = 200;
  float temperature = 0.8f;
  int top_k = 40;
  uint64_t seed = 0;
  std::string precision;  // "" = the run's train.precision
  bool print_ids = false;
};

void run_generate(const GenerateOptions& o) {
  auto fail = [](const Status& s) { throw ExitError(exit_code(s), s.message()); };
  if (!o.precision.empty() && o.precision != "fp32" && o.precision != "bf16")
    fail(Status::invalid("[generate] --precision '" + o.precision + "' is not one of fp32, bf16"));
  auto cfg = runtime::load_config(o.run_dir + "/config.toml");
  if (!cfg) fail(cfg.status());
  const std::string precision = o.precision.empty() ? cfg->train.precision : o.precision;
  // crucible's SentencePiece model, or an imported GPT-2 byte-level BPE.
  auto loaded = data::load_run_tokenizer(o.run_dir);
  if (!loaded) fail(loaded.status());
  const data::TextTokenizer* tok = loaded->get();
  if (tok->vocab_size() > cfg->model.vocab_size)
    fail(Status::invalid(
        "[generate] " + tok->path() + " has " + std::to_string(tok->vocab_size()) +
        " tokens, more than model.vocab_size = " + std::to_string(cfg->model.vocab_size)));
  auto found = ckpt::find_latest_valid(o.run_dir + "/ckpt");
  if (!found) fail(found.status());
  for (const auto& w : found->warnings) std::fprintf(stderr, "%s\n", w.c_str());
  // The tokenizer must be the one the checkpoint was trained with: another
  // one maps the same ids to other text.
  if (!found->state.data.is_null()) {
    const std::string name = std::filesystem::path(found->dir).filename().string();
    auto pin = runtime::DataPin::from_json(found->state.data, found->dir + "/manifest.json");
    if (!pin) fail(pin.status());
    Status s = runtime::check_tokenizer_pin(*pin, tok->fingerprint(), tok->path(), name);
    if (!s) fail(s);
  }
  // Checkpoints hold f32 master weights: either precision runs from any run.
  nn::GPTPart part = nn::GPTPart::whole(cfg->model);
  part.precision = dtype_named(precision);
  nn::GPT model(cfg->model, part);
  auto state = ckpt::load_checkpoint(found->dir, model.params(), nullptr);
  if (!state) fail(state.status());
  std::fprintf(stderr, "[generate] %s (step %lld), %s, temperature %g, top-k %d, seed %llu\n",
               found->dir.c_str(), (long long)found->step, precision.c_str(), o.temperature, o.top_k,
               (unsigned long long)o.seed);

  std::vector<int32_t> prompt = tok->encode(o.prompt);
  if (int(prompt.size()) >= cfg->model.seq_len)  // keep the prompt's end
    prompt.erase(prompt.begin(), prompt.end() - (cfg->model.seq_len - 1));
  std::fputs(o.prompt.c_str(), stdout);
  // Stream: decode everything generated so far and print what is new (pieces
  // may be partial UTF-8 bytes until the next token completes them).
  std::vector<int32_t> out;
  std::string printed;
  auto on_token = [&](int32_t id) {
    if (id == tok->eos_id()) {  // a document ended; show it as fortune(6) does
      std::fputs("\n%\n", stdout);
      out.clear();
      printed.clear();
      return;
    }
    out.push_back(id);
    std::string text = tok->decode(out);
    if (text.size() > printed.size() && text.compare(0, printed.size(), printed) == 0) {
      std::fputs(text.c_str() + printed.size(), stdout);
      std::fflush(stdout);
      printed = std::move(text);
    }
  };
  nn::Generator gen(model);
  Rng rng(o.seed, 0x6e6e);
  // A padded embedding's extra rows (model.vocab_size above the tokenizer's)
  // are never sampled: no text stands for them.
  const std::vector<int32_t> ids =
      nn::generate(gen, prompt, o.tokens, tok->eos_id(),
                   {o.temperature, o.top_k, tok->vocab_size()}, rng, on_token);
  std::fputs("\n", stdout);
  if (o.print_ids) {  // for comparisons with other implementations (tests/hf)
    nlohmann::json j = {{"prompt", prompt}, {"new", ids}};
    std::fprintf(stderr, "[generate] ids %s\n", j.dump().c_str());
  }
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto o = std::make_shared<GenerateOptions>();
  auto* cmd = app.add_subcommand("generate", "Sample text from a run's newest checkpoint");
  cmd->add_option("run", o->run_dir, "Run directory (runs/NAME)")->required();
  cmd->add_option("--prompt", o->prompt, "Text to continue (default: a new document)");
  cmd->add_option("--tokens", o->tokens, "Tokens to generate")
      ->capture_default_str()
      ->check(positive());
  cmd->add_option("--temperature", o->temperature, "Sampling temperature (0: greedy)")
      ->capture_default_str()
      ->check(non_negative());
  cmd->add_option("--top-k", o->top_k, "Sample among the K most likely tokens (0: all)")
      ->capture_default_str()
      ->check(non_negative());
  cmd->add_option("--seed", o->seed, "Sampling seed")->capture_default_str()->check(integer_in(0, INT64_MAX));
  cmd->add_option("--precision", o->precision, "fp32 | bf16 (default: the run's train.precision)");
  cmd->add_flag("--print-ids", o->print_ids,
                "Also print the prompt's and the generated token ids (one JSON line on stderr)");
  cmd->callback([o] { run_generate(*o); });
}

}  // namespace crucible::cli
