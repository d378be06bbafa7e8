// `crucible import HF_DIR -o RUN`: a Hugging Face GPT-2 directory (config.json,
// safetensors weights, GPT-2's byte-level BPE) as a crucible run at step 0,
// which `crucible generate` and `crucible export` accept
// (runtime/hf_interchange.h, docs/interchange.md).
#include <cstdio>
#include <memory>

#include "cli/commands.h"
#include "runtime/hf_interchange.h"

namespace crucible::cli {

void add_import_command(CLI::App& app) {
  struct Options {
    std::string hf_dir, run_dir;
  };
  auto o = std::make_shared<Options>();
  auto* cmd =
      app.add_subcommand("import", "Read a Hugging Face GPT-2 directory into a new run directory");
  cmd->add_option("hf_dir", o->hf_dir,
                  "Hugging Face model directory (config.json, model.safetensors, tokenizer)")
      ->required();
  cmd->add_option("-o,--output", o->run_dir, "The new run directory (absent or empty)")->required();
  cmd->callback([o] {
    auto sum = runtime::import_hf_dir(o->hf_dir, o->run_dir);
    if (!sum) throw ExitError(exit_code(sum.status()), sum.status().message());
    const auto& m = sum->model;
    std::fprintf(stderr,
                 "[import] %s -> %s: GPT-2 %d layers, %d heads, width %d, context %d, vocab %d "
                 "(%.1fM parameters); "
                 "tokenizer %s (%d tokens); checkpoint step 0\n",
                 o->hf_dir.c_str(), o->run_dir.c_str(), m.n_layer, m.n_head, m.n_embd, m.seq_len,
                 m.vocab_size, double(sum->params) / 1e6, sum->tokenizer_source.c_str(),
                 sum->tokenizer_vocab);
  });
}

}  // namespace crucible::cli
