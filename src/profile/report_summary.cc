// The report's "summary" section: the run's figures at a glance, a
// fine-tuning run's validation loss before and after, and the configuration
// keys that decide what a step costs and how it learns.
#include <toml++/toml.h>

#include <cmath>
#include <filesystem>
#include <sstream>

#include "core/file_io.h"
#include "core/format.h"
#include "profile/report_sections.h"

namespace crucible::profile {

namespace fs = std::filesystem;
using nlohmann::json;
using svg::escape;
using svg::format_number;

namespace {

// The run's config.toml, parsed (its text in *text_out); an empty table when the run has none.
Result<toml::table> run_config_toml(const std::string& cfg_path, std::string* text_out) {
  std::error_code ec;
  if (!fs::exists(cfg_path, ec)) return toml::table{};
  auto text = read_file(cfg_path);
  if (!text) return Status::error(text.status().code(), "[report] " + text.status().message());
  try {
    toml::table cfg = toml::parse(*text, cfg_path);
    *text_out = std::move(*text);
    return cfg;
  } catch (const toml::parse_error& e) {
    return Status::corrupt("[report] " + cfg_path + ": " + std::string(e.description()));
  }
}

}  // namespace

// val_before: a fine-tuning run's validation loss before its first step
// (metrics.jsonl's step 0), NaN for other runs.
Result<std::string> summary_section(const std::string& run_dir, const std::vector<json>& m, double val_before) {
  const std::string cfg_path = run_dir + "/config.toml";
  std::string text;
  auto parsed = run_config_toml(cfg_path, &text);
  if (!parsed) return parsed.status();
  const toml::table& cfg = *parsed;
  std::string body;
  body += "<table class=\"kv\">";
  body += kv_row("run directory", run_dir);
  body += kv_row("steps", fmt_fixed(num(m.back(), "step"), 0));
  body += kv_row("final train loss", fmt_fixed(num(m.back(), "loss"), 4));
  double val = std::nan("");
  for (const json& r : m)
    if (num(r, "val_loss") >= 0) val = num(r, "val_loss");
  body += kv_row("final validation loss", fmt_fixed(val, 4));
  if (std::isfinite(val_before))
    body = "<p class=\"finetune\">" +
           escape("fine-tuned from " + cfg["init"]["from"].value_or(std::string("?")) + ": val loss " +
                  fmt_fixed(val_before, 4) + " -> " + fmt_fixed(val, 4)) +
           "</p>" + body;
  // The first step pays one-off costs (first touch, JIT): the median ignores it.
  body += kv_row("tokens/s (median)", format_number(median_column(m, "tokens_per_s")));
  body += kv_row("MFU (median)", fmt_fixed(median_column(m, "mfu") * 100, 1, " %"));
  double total_ms = 0;
  for (const json& r : m)
    for (const char* k : {"step_ms", "eval_ms", "ckpt_stall_ms", "ckpt_flush_ms"})
      if (std::isfinite(num(r, k))) total_ms += num(r, k);
  body += kv_row("run time (steps + evals + checkpoint stalls)", fmt_fixed(total_ms / 1000, 1, " s"));
  body += kv_row("step time (median)", fmt_fixed(median_column(m, "step_ms"), 1, " ms"));
  body += "</table>";

  if (!text.empty()) {
    // The keys that decide what a step costs and how it learns.
    const std::vector<std::pair<const char*, std::vector<const char*>>> essentials = {
        {"model", {"n_layer", "n_head", "n_embd", "vocab_size", "seq_len"}},
        {"train", {"steps", "batch_size", "grad_accum", "threads", "precision", "recompute"}},
        {"optim", {"lr", "warmup_steps", "weight_decay"}},
        {"dist", {"ranks", "zero", "reproducible", "grad_dtype"}}};
    body += "<h3>Configuration</h3><table class=\"kv\">";
    for (const auto& [sec, keys] : essentials)
      for (const char* k : keys) {
        const toml::node* n = cfg.at_path(std::string(sec) + "." + k).node();
        if (!n) continue;
        std::ostringstream v;
        n->visit([&](auto&& x) {
          if constexpr (toml::is_string<decltype(x)>)
            v << x.get();
          else if constexpr (toml::is_floating_point<decltype(x)>)
            v << format_double(x.get());  // 0.1, not toml++'s 0.10000000000000001
          else
            v << x;
        });
        body += kv_row(std::string(sec) + "." + k, v.str());
      }
    body +=
        "</table><details><summary>config.toml</summary><pre>" + escape(text) + "</pre></details>";
  }
  return html_section("summary", "Summary", body);
}

}  // namespace crucible::profile
