// `crucible export RUN [-o FILE] [--step N]`: one Hugging Face safetensors
// file of a run's weights (GPT-2 names and layouts, loadable in PyTorch),
// or with --hf DIR a whole Hugging Face GPT-2 directory (weights, config,
// tokenizer: runtime/hf_interchange.h) that transformers loads as is;
// whatever layout wrote the checkpoint: a sharded checkpoint's slices are
// assembled into whole tensors. The bytes depend only on the weights: the
// same weights exported from any layout's checkpoint give the same file.
#include <cstdio>
#include <filesystem>
#include <memory>

#include "ckpt/checkpoint.h"
#include "ckpt/model_io.h"
#include "cli/commands.h"
#include "core/output_path.h"
#include "nn/gpt.h"
#include "runtime/config.h"
#include "runtime/hf_interchange.h"

namespace crucible::cli {

namespace {

struct ExportOptions {
  std::string run_dir, output, hf_dir;
  int64_t step = -1;
  std::string dtype = "f32";
  bool output_given = false;
};

void run_export(const ExportOptions& o) {
  auto fail = [](const Status& s) { throw ExitError(exit_code(s), s.message()); };
  if (o.dtype != "f32" && o.dtype != "bf16")
    fail(Status::invalid("[export] --dtype '" + o.dtype + "' is not one of f32, bf16"));
  // -o first: a path that cannot be written wastes no loading (the default,
  // RUN/step_NNNNNNN.safetensors, once the checkpoint is known).
  const bool hf = !o.hf_dir.empty();
  if (hf && o.output_given)
    fail(Status::invalid("[export] -o and --hf are exclusive (--hf DIR names the output)"));
  if (hf && o.dtype != "f32")
    fail(Status::invalid("[export] --hf writes f32 weights (--dtype " + o.dtype + ")"));
  if (hf) {
    Status s = runtime::check_new_dir(o.hf_dir, "[export] --hf");
    if (!s) fail(s);
  }
  if (o.output_given) {
    Status s = check_output_path(o.output, "[export] -o");
    if (!s) fail(s);
  }
  auto cfg = runtime::load_config(o.run_dir + "/config.toml");
  if (!cfg) fail(cfg.status());
  std::string dir;
  if (o.step >= 0) {
    dir = o.run_dir + "/ckpt/" + ckpt::step_dir_name(o.step);
    if (!std::filesystem::is_directory(dir))
      fail(Status::not_found("[export] --step " + std::to_string(o.step) + ": " + o.run_dir +
                             " has no checkpoint of that step"));
  } else {
    auto found = ckpt::find_latest_valid(o.run_dir + "/ckpt");
    if (!found) fail(found.status());
    for (const auto& w : found->warnings) std::fprintf(stderr, "%s\n", w.c_str());
    dir = found->dir;
  }
  const std::string out =
      !o.output_given
          ? o.run_dir + "/" + std::filesystem::path(dir).filename().string() + ".safetensors"
          : o.output;
  if (!hf) {
    Status s = check_output_path(out, "[export] -o");
    if (!s) fail(s);
  }
  nn::GPT model(cfg->model);
  auto state = ckpt::load_checkpoint(dir, model.params(), nullptr);  // verifies every byte first
  if (!state) fail(state.status());
  if (hf) {
    if (Status s = runtime::export_hf_dir(o.run_dir, cfg->model, model.params(), o.hf_dir); !s)
      fail(s);
    std::fprintf(stderr, "[export] %s (step %lld) -> %s (Hugging Face GPT-2 directory)\n",
                 dir.c_str(), (long long)state->step, o.hf_dir.c_str());
    return;
  }
  // Checkpoints hold f32 master weights whatever train.precision was; bf16
  // is a rounding of them on the way out.
  Status s = ckpt::save_params(model.params(), out, false, {{"format", "pt"}},
                               dtype_named(o.dtype));
  if (!s) fail(s);
  std::string layout;
  for (const char* k : {"dp", "tp", "pp"})
    if (state->world.contains(k)) layout += std::string(layout.empty() ? "" : " ") + k + "=" + state->world[k].dump();
  std::fprintf(stderr, "[export] %s (step %lld%s) -> %s (%s, %.1f MB)\n", dir.c_str(), (long long)state->step,
               layout.empty() ? "" : (", written at " + layout).c_str(), out.c_str(), o.dtype.c_str(),
               double(std::filesystem::file_size(out)) / 1e6);
}

}  // namespace

void add_export_command(CLI::App& app) {
  auto o = std::make_shared<ExportOptions>();
  auto* cmd = app.add_subcommand("export", "Write a run's weights as one Hugging Face safetensors file");
  cmd->add_option("run", o->run_dir, "Run directory (runs/NAME)")->required();
  auto* out = cmd->add_option("-o,--output", o->output,
                              "Output file (default: RUN/step_NNNNNNN.safetensors)");
  cmd->add_option("--step", o->step, "The checkpoint of this step (default: the newest valid one)")
      ->check(integer_in(0, INT64_MAX));
  cmd->add_option(
      "--hf", o->hf_dir,
      "Write a Hugging Face GPT-2 directory instead (config.json, model.safetensors, tokenizer)");
  cmd->add_option("--dtype", o->dtype, "f32 | bf16 (rounded from the f32 master weights)")->capture_default_str();
  cmd->callback([o, out] {
    o->output_given = out->count() > 0;  // -o "" is a bad name, not the default
    run_export(*o);
  });
}

}  // namespace crucible::cli
