#include "runtime/config.h"

#include "core/device.h"

#include "runtime/config_schema.h"

#include <toml++/toml.h>

#include "core/file_io.h"
#include "core/format.h"
#include "data/corpus.h"
#include "parallel/layout.h"

#include <algorithm>
#include <initializer_list>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <locale>
#include <nlohmann/json.hpp>
#include <sstream>
#include <variant>

namespace crucible::runtime {

namespace {

#include "default_config.inc"  // kDefaultConfigToml: configs/tiny.toml

// Curation profile "short" (docs/curation.md, "Short documents"): Gopher's
// rules were tuned on web pages of hundreds of words; for short documents
// (fortunes, quotes, titles) the rules that measure "is this a page of prose"
// are relaxed, the ones that catch junk (symbols, repetition) kept.
constexpr const char* kShortProfileToml = R"(
[curate.quality]
min_words = 3              # a fortune of 3 words is text; Gopher's 50 drops most of them
min_stop_words = 0         # off: a one-line quote rarely holds two of the/be/to/of/...
max_ellipsis_ratio = 0.3   # "Go ahead... make my day." is style, not a truncated page
max_ellipsis_lines = -1    # off: one line ending in "..." is 100% of a one-line fortune
min_mean_word_length = 2.5 # short texts have noisy means ("I am so")
max_mean_word_length = 12
[curate.repetition]
max_top_2gram = -1         # off: in 11 words, "with his" twice is 30% of the characters
max_top_3gram = -1
max_top_4gram = -1
max_dup_line_frac = 0.5    # refrains in short poems; long runs of copies still go
max_dup_line_char_frac = 0.4
[curate.near]
threshold = 0.8            # 8 shingles: one changed word moves J to 0.75 and is a new joke
)";

using config::Field;
using schema::bad;
using schema::one_of;

// The schema: every key a config may hold, bound to where it lives in `c`.
std::vector<Field> fields(Config& c) {
  return {
      {"model.n_layer", &c.model.n_layer},
      {"model.n_head", &c.model.n_head},
      {"model.n_embd", &c.model.n_embd},
      {"model.vocab_size", &c.model.vocab_size},
      {"model.seq_len", &c.model.seq_len},
      {"data.source", &c.data.source},
      {"data.format", &c.data.format},
      {"data.dataset", &c.data.dataset},
      {"data.cache_dir", &c.data.cache_dir},
      {"data.val_fraction", &c.data.val_fraction},
      {"data.vocab_size", &c.data.vocab_size},
      {"data.tokenizer", &c.data.tokenizer},
      {"init.from", &c.init.from},
      {"train.steps", &c.train.steps},
      {"train.batch_size", &c.train.batch_size},
      {"train.grad_accum", &c.train.grad_accum},
      {"train.seed", &c.train.seed},
      {"train.eval_every", &c.train.eval_every},
      {"train.eval_batches", &c.train.eval_batches},
      {"train.threads", &c.train.threads},
      {"train.memory_limit_gb", &c.train.memory_limit_gb},
      {"train.precision", &c.train.precision},
      {"train.recompute", &c.train.recompute},
      {"train.fused_head", &c.train.fused_head},
      {"optim.lr", &c.optim.lr},
      {"optim.weight_decay", &c.optim.weight_decay},
      {"optim.warmup_steps", &c.optim.warmup_steps},
      {"optim.grad_clip", &c.optim.grad_clip},
      {"optim.beta1", &c.optim.beta1},
      {"optim.beta2", &c.optim.beta2},
      {"optim.eps", &c.optim.eps},
      {"optim.min_lr_ratio", &c.optim.min_lr_ratio},
      {"optim.moments", &c.optim.moments},
      {"ckpt.every", &c.ckpt.every},
      {"ckpt.keep", &c.ckpt.keep},
      {"run.dir", &c.run.dir},
      {"run.name", &c.run.name},
      {"run.log_every_s", &c.run.log_every_s},
      {"run.sample_tokens", &c.run.sample_tokens},
      {"run.trace_from", &c.run.trace_from},
      {"run.trace_steps", &c.run.trace_steps},
      {"run.probe_max_age_days", &c.run.probe_max_age_days},
      {"run.device", &c.run.device},
      {"run.cuda_graphs", &c.run.cuda_graphs},
      {"dist.bucket_mb", &c.dist.bucket_mb},
      {"dist.zero", &c.dist.zero},
      {"dist.reproducible", &c.dist.reproducible},
      {"dist.overlap", &c.dist.overlap},
      {"dist.embedding_rows", &c.dist.embedding_rows},
      {"dist.tp", &c.dist.tp},
      {"dist.pp", &c.dist.pp},
      {"dist.pp_virtual", &c.dist.pp_virtual},
      {"dist.pp_schedule", &c.dist.pp_schedule},
      {"dist.sequence_parallel", &c.dist.sequence_parallel},
      {"dist.pp_split", &c.dist.pp_split},
      {"dist.grad_dtype", &c.dist.grad_dtype},
      {"dist.share_gpus", &c.dist.share_gpus},
      {"fault.hang_timeout_s", &c.fault.hang_timeout_s},
      {"fault.heartbeat_window_s", &c.fault.heartbeat_window_s},
      {"fault.setup_timeout_s", &c.fault.setup_timeout_s},
      {"fault.max_restarts", &c.fault.max_restarts},
      {"fault.restart_backoff_s", &c.fault.restart_backoff_s},
      {"fault.shrink_after", &c.fault.shrink_after},
      {"fault.stop_grace_s", &c.fault.stop_grace_s},
      {"fault.inject", &c.fault.inject},
      {"curate.enabled", &c.curate.enabled},
      {"curate.profile", &c.curate.profile},
      {"curate.nfc", &c.curate.nfc},
      {"curate.whitespace", &c.curate.whitespace},
      {"curate.gopher_quality", &c.curate.gopher_quality},
      {"curate.gopher_repetition", &c.curate.gopher_repetition},
      {"curate.c4", &c.curate.c4},
      {"curate.exact_dedup", &c.curate.exact_dedup},
      {"curate.near_dedup", &c.curate.near_dedup},
      {"curate.chunk_mb", &c.curate.chunk_mb},
      {"curate.memory_mb", &c.curate.memory_mb},
      {"curate.partitions", &c.curate.partitions},
      {"curate.threads", &c.curate.threads},
      {"curate.examples", &c.curate.examples},
      {"curate.keep_work", &c.curate.keep_work},
      {"curate.quality.min_words", &c.quality.min_words},
      {"curate.quality.max_words", &c.quality.max_words},
      {"curate.quality.min_mean_word_length", &c.quality.min_mean_word_length},
      {"curate.quality.max_mean_word_length", &c.quality.max_mean_word_length},
      {"curate.quality.max_hash_ratio", &c.quality.max_hash_ratio},
      {"curate.quality.max_ellipsis_ratio", &c.quality.max_ellipsis_ratio},
      {"curate.quality.max_bullet_lines", &c.quality.max_bullet_lines},
      {"curate.quality.max_ellipsis_lines", &c.quality.max_ellipsis_lines},
      {"curate.quality.min_alpha_words", &c.quality.min_alpha_words},
      {"curate.quality.min_stop_words", &c.quality.min_stop_words},
      {"curate.repetition.max_dup_line_frac", &c.repetition.max_dup_line_frac},
      {"curate.repetition.max_dup_para_frac", &c.repetition.max_dup_para_frac},
      {"curate.repetition.max_dup_line_char_frac", &c.repetition.max_dup_line_char_frac},
      {"curate.repetition.max_dup_para_char_frac", &c.repetition.max_dup_para_char_frac},
      {"curate.repetition.max_top_2gram", &c.repetition.max_top_2gram},
      {"curate.repetition.max_top_3gram", &c.repetition.max_top_3gram},
      {"curate.repetition.max_top_4gram", &c.repetition.max_top_4gram},
      {"curate.repetition.max_dup_5gram", &c.repetition.max_dup_ngram[0]},
      {"curate.repetition.max_dup_6gram", &c.repetition.max_dup_ngram[1]},
      {"curate.repetition.max_dup_7gram", &c.repetition.max_dup_ngram[2]},
      {"curate.repetition.max_dup_8gram", &c.repetition.max_dup_ngram[3]},
      {"curate.repetition.max_dup_9gram", &c.repetition.max_dup_ngram[4]},
      {"curate.repetition.max_dup_10gram", &c.repetition.max_dup_ngram[5]},
      {"curate.c4_lines.min_words_per_line", &c.c4.min_words_per_line},
      {"curate.c4_lines.min_sentences", &c.c4.min_sentences},
      {"curate.c4_lines.terminal_punct", &c.c4.terminal_punct},
      {"curate.c4_lines.drop_javascript", &c.c4.drop_javascript},
      {"curate.c4_lines.drop_policy", &c.c4.drop_policy},
      {"curate.c4_lines.drop_lorem_ipsum", &c.c4.drop_lorem_ipsum},
      {"curate.c4_lines.drop_curly_bracket", &c.c4.drop_curly_bracket},
      {"curate.near.ngram", &c.near.ngram},
      {"curate.near.bands", &c.near.bands},
      {"curate.near.rows", &c.near.rows},
      {"curate.near.hash_bits", &c.near.hash_bits},
      {"curate.near.threshold", &c.near.threshold},
      {"curate.near.seed", &c.near.seed},
  };
}

Status apply_table(Config& cfg, const toml::table& root, const std::string& origin) {
  return schema::apply_table(fields(cfg), root, origin, &cfg.explicit_keys);
}

}  // namespace

const char* default_config_toml() { return kDefaultConfigToml; }

namespace {

// Curation thresholds must be in range; a rule is switched off by its own
// section's switch (curate.*) or, for a single rule, by a negative max / zero min.
Status validate_curate(const Config& c) {
  CRUCIBLE_RETURN_IF_ERROR(one_of("curate.profile", c.curate.profile, {"auto", "web", "short"}));
  if (!(c.curate.chunk_mb >= 0.001 && c.curate.chunk_mb <= 4096))
    return bad("curate.chunk_mb", "must be in [0.001, 4096]");
  if (!(c.curate.memory_mb >= 16)) return bad("curate.memory_mb", "must be >= 16");
  if (c.curate.partitions < 0 || c.curate.partitions > 65536)
    return bad("curate.partitions", "must be in [0, 65536] (0: from curate.memory_mb)");
  if (c.curate.threads < 0) return bad("curate.threads", "must be >= 0 (0: all cores)");
  if (c.curate.examples < 0 || c.curate.examples > 1000)
    return bad("curate.examples", "must be in [0, 1000]");
  if (c.quality.min_words < 0 || c.quality.max_words < 0)
    return bad("curate.quality.min_words", "word counts must be >= 0");
  if (c.near.ngram < 1 || c.near.ngram > 64) return bad("curate.near.ngram", "must be in [1, 64]");
  if (c.near.bands < 1 || c.near.bands > 1024) return bad("curate.near.bands", "must be in [1, 1024]");
  if (c.near.rows < 1 || c.near.rows > 1024) return bad("curate.near.rows", "must be in [1, 1024]");
  if (c.near.bands * c.near.rows > 4096) return bad("curate.near.rows", "bands * rows must be <= 4096");
  if (c.near.hash_bits != 32 && c.near.hash_bits != 64) return bad("curate.near.hash_bits", "must be 32 or 64");
  if (!(c.near.threshold >= 0 && c.near.threshold <= 1))
    return bad("curate.near.threshold", "must be in [0, 1]");
  if (c.c4.min_words_per_line < 0) return bad("curate.c4_lines.min_words_per_line", "must be >= 0");
  if (c.c4.min_sentences < 0) return bad("curate.c4_lines.min_sentences", "must be >= 0");
  return Status::ok();
}

}  // namespace

parallel::LayoutSpec layout_spec(const Config& c) {
  return {c.dist.tp, c.dist.pp, c.dist.pp_virtual, c.dist.pp_schedule, c.dist.sequence_parallel, c.dist.pp_split};
}

Status validate(const FaultConfig& f) {
  if (!(f.hang_timeout_s > 0)) return bad("fault.hang_timeout_s", "must be > 0");
  if (!(f.heartbeat_window_s >= 1 && f.heartbeat_window_s <= 3600))
    return bad("fault.heartbeat_window_s", "must be between 1 and 3600 (heartbeats come every 0.2 s)");
  if (!(f.setup_timeout_s > 0)) return bad("fault.setup_timeout_s", "must be > 0");
  if (f.max_restarts < 0) return bad("fault.max_restarts", "must be >= 0");
  if (!(f.restart_backoff_s >= 0)) return bad("fault.restart_backoff_s", "must be >= 0");
  if (f.shrink_after < 1) return bad("fault.shrink_after", "must be >= 1");
  if (!(f.stop_grace_s > 0)) return bad("fault.stop_grace_s", "must be > 0");
  return Status::ok();
}

Status validate(const Config& c) {
  CRUCIBLE_RETURN_IF_ERROR(c.model.validate());
  if (c.model.vocab_size > 65536 * 16) return bad("model.vocab_size", "must be <= 1048576");
  if (c.data.dataset.empty() && c.data.source.empty())
    return bad("data.source", "must name at least one file or directory (or set data.dataset)");
  CRUCIBLE_RETURN_IF_ERROR(one_of("data.format", c.data.format, {"auto", "fortunes", "text", "jsonl"}));
  if (!(c.data.val_fraction > 0 && c.data.val_fraction <= 0.5))
    return bad("data.val_fraction", "must be in (0, 0.5]");
  if (c.data.vocab_size < 0 || c.data.vocab_size > c.model.vocab_size)
    return bad("data.vocab_size", std::to_string(c.data.vocab_size) +
                                      " must be in [0, model.vocab_size] (0: model.vocab_size)");
  if (c.train.steps < 1) return bad("train.steps", "must be >= 1");
  if (c.train.batch_size < 1) return bad("train.batch_size", "must be >= 1");
  if (c.train.grad_accum < 1) return bad("train.grad_accum", "must be >= 1");
  if (c.train.seed > uint64_t(std::numeric_limits<int64_t>::max()))
    return bad("train.seed", "must be < 2^63");
  if (c.train.eval_every < 0) return bad("train.eval_every", "must be >= 0 (0: only at the end)");
  if (c.train.eval_batches < 1) return bad("train.eval_batches", "must be >= 1");
  if (c.train.threads < 0) return bad("train.threads", "must be >= 0 (0: all cores)");
  if (!(c.train.memory_limit_gb >= 0 && std::isfinite(c.train.memory_limit_gb)))
    return bad("train.memory_limit_gb", "must be >= 0 (0: no limit but the machine's)");
  CRUCIBLE_RETURN_IF_ERROR(one_of("train.precision", c.train.precision, {"fp32", "bf16"}));
  CRUCIBLE_RETURN_IF_ERROR(one_of("train.recompute", c.train.recompute, {"none", "selective", "full"}));
  CRUCIBLE_RETURN_IF_ERROR(one_of("optim.moments", c.optim.moments, {"f32", "bf16"}));
  if (!(c.optim.lr > 0 && std::isfinite(c.optim.lr))) return bad("optim.lr", "must be > 0");
  if (!(c.optim.weight_decay >= 0)) return bad("optim.weight_decay", "must be >= 0");
  if (c.optim.warmup_steps < 0) return bad("optim.warmup_steps", "must be >= 0");
  if (!(c.optim.grad_clip >= 0)) return bad("optim.grad_clip", "must be >= 0 (0: no clipping)");
  if (!(c.optim.beta1 >= 0 && c.optim.beta1 < 1)) return bad("optim.beta1", "must be in [0, 1)");
  if (!(c.optim.beta2 >= 0 && c.optim.beta2 < 1)) return bad("optim.beta2", "must be in [0, 1)");
  if (!(c.optim.eps > 0)) return bad("optim.eps", "must be > 0");
  if (!(c.optim.min_lr_ratio >= 0 && c.optim.min_lr_ratio <= 1))
    return bad("optim.min_lr_ratio", "must be in [0, 1]");
  if (c.ckpt.every < 0) return bad("ckpt.every", "must be >= 0 (0: only at the end)");
  if (c.ckpt.keep < 1) return bad("ckpt.keep", "must be >= 1");
  if (c.run.name.empty() || c.run.name.find('/') != std::string::npos)
    return bad("run.name", "must be a non-empty name without '/'");
  if (!(c.dist.bucket_mb > 0 && c.dist.bucket_mb <= 4096))
    return bad("dist.bucket_mb", "must be in (0, 4096]");
  if (c.dist.zero < 0 || c.dist.zero > 2) return bad("dist.zero", "must be 0, 1 or 2");
  CRUCIBLE_RETURN_IF_ERROR(one_of("dist.grad_dtype", c.dist.grad_dtype, {"f32", "bf16"}));
  if (c.dist.grad_dtype == "bf16" && c.dist.reproducible)
    return bad("dist.grad_dtype", "bf16 needs dist.reproducible = false (the reproducible reduction is an f32 tree)");
  if (c.dist.reproducible && c.dist.zero != 0)
    return bad("dist.reproducible",
               "needs dist.zero = 0 (the reproducible reduction is a tree over whole gradients)");
  {  // what the layout needs of the model and the batch, whatever the world size
    const int64_t grid = int64_t(c.dist.tp) * c.dist.pp;
    if (c.dist.tp >= 1 && c.dist.pp >= 1 && grid > (int64_t(1) << 24))
      return bad("dist.tp x dist.pp", std::to_string(grid) + " ranks is more than 16777216");
    auto layout = parallel::Layout::make(layout_spec(c), int(grid), c.model, c.train.grad_accum);
    if (!layout) return Status::invalid("[config] " + layout.status().message().substr(9));
  }
  if (!(c.run.log_every_s > 0)) return bad("run.log_every_s", "must be > 0");
  CRUCIBLE_RETURN_IF_ERROR(validate(c.fault));
  if (c.run.sample_tokens < 0) return bad("run.sample_tokens", "must be >= 0");
  if (c.run.trace_from < 1) return bad("run.trace_from", "must be >= 1 (a step number)");
  if (c.run.trace_steps < 0) return bad("run.trace_steps", "must be >= 0 (0: no trace)");
  if (!(c.run.probe_max_age_days > 0 && c.run.probe_max_age_days <= 36500))
    return bad("run.probe_max_age_days", "must be > 0 and at most 36500");
  if (auto d = Device::parse(c.run.device); !d)
    return bad("run.device", "must be cpu, cuda or cuda:N, not '" + c.run.device + "'");
  return validate_curate(c);
}

Status apply_curate_profile(Config& cfg, const std::string& profile) {
  if (profile == "web") {
    cfg.curate.profile = "web";
    return validate(cfg);
  }
  if (profile != "short")
    return bad("curate.profile", "'" + profile + "' is not one of auto, web, short");
  toml::table preset = toml::parse(std::string_view(kShortProfileToml), std::string_view("<curate profile short>"));
  Config relaxed = cfg;
  CRUCIBLE_RETURN_IF_ERROR(apply_table(relaxed, preset, "<curate profile short>"));
  // Copy the relaxed value of every key the user did not set.
  auto to = fields(cfg), from = fields(relaxed);
  for (size_t i = 0; i < to.size(); ++i) {
    if (std::find(cfg.explicit_keys.begin(), cfg.explicit_keys.end(), to[i].key) !=
        cfg.explicit_keys.end())
      continue;
    std::visit([&](auto* dst) { *dst = *std::get<decltype(dst)>(from[i].target); }, to[i].target);
  }
  cfg.curate.profile = "short";
  return validate(cfg);
}

Result<std::string> detect_curate_profile(const std::vector<std::string>& inputs,
                                          const std::string& format) {
  if (format == "fortunes") return std::string("short");
  if (format != "auto") return std::string("web");
  auto files = data::list_inputs(inputs, format);
  if (!files) return files.status();
  for (const auto& f : *files)
    if (f.format == data::CorpusFormat::kFortunes) return std::string("short");
  return std::string("web");
}

Status resolve_config(Config& cfg) {
  if (!cfg.curate.enabled || !cfg.data.dataset.empty()) return Status::ok();
  // Applying a profile again changes nothing (it fills the same keys with the
  // same values), so an explicit profile is applied here as well as "auto".
  std::string profile = cfg.curate.profile;
  if (profile == "auto") {
    auto detected = detect_curate_profile(cfg.data.source, cfg.data.format);
    if (!detected) return detected.status();
    profile = *detected;
  }
  return apply_curate_profile(cfg, profile);
}

Result<Config> parse_config(const std::string& toml_text, const std::string& origin,
                            const std::vector<std::string>& overrides) {
  Config cfg;
  auto root = schema::parse_toml(toml_text, origin);
  if (!root) return root.status();
  CRUCIBLE_RETURN_IF_ERROR(apply_table(cfg, *root, origin));
  for (const auto& o : overrides) CRUCIBLE_RETURN_IF_ERROR(schema::apply_override(fields(cfg), o, &cfg.explicit_keys));
  CRUCIBLE_RETURN_IF_ERROR(validate(cfg));
  return cfg;
}

Result<Config> load_config(const std::string& path, const std::vector<std::string>& overrides) {
  if (path.empty()) return parse_config(default_config_toml(), "<default config>", overrides);
  auto text = read_file(path);  // a directory is not an empty config
  if (!text) return Status::invalid("[config] " + text.status().message());
  return parse_config(*text, path, overrides);
}

std::string to_toml(const Config& cfg_in) {
  Config cfg = cfg_in;
  return schema::to_toml(fields(cfg),
                         "# Resolved crucible configuration (every key, defaults included; curation\n"
                         "# profile applied). Read back, it resolves to itself.\n");
}

nlohmann::json to_json(const Config& cfg_in) {
  Config cfg = cfg_in;
  return schema::to_json(fields(cfg));
}

}  // namespace crucible::runtime
