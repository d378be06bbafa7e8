// `crucible generate RUN`: samples text from the newest valid checkpoint of a
// run, with a KV cache (nn/generator.h), streaming tokens to stdout.
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/rng.h"
#include "data/text_tokenizer.h"
#include "nn/generator.h"
#include "nn/gpt.h"
#include "runtime/inference_model.h"

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
  auto opened = runtime::open_inference_model(o.run_dir, o.precision, "[generate]");
  if (!opened) fail(opened.status());
  for (const auto& w : opened->warnings) std::fprintf(stderr, "%s\n", w.c_str());
  const data::TextTokenizer* tok = opened->tokenizer.get();
  const auto& cfg = opened->config;
  nn::GPT& model = *opened->model;
  std::fprintf(stderr, "[generate] %s (step %lld), %s, temperature %g, top-k %d, seed %llu\n",
               opened->checkpoint.c_str(), (long long)opened->step, opened->precision.c_str(),
               o.temperature, o.top_k, (unsigned long long)o.seed);

  std::vector<int32_t> prompt = tok->encode(o.prompt);
  if (int(prompt.size()) >= cfg.model.seq_len)  // keep the prompt's end
    prompt.erase(prompt.begin(), prompt.end() - (cfg.model.seq_len - 1));
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
  nn::Generator gen(model, /*constant_weights=*/true);  // as `crucible serve` reads them
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
