#include "runtime/config.h"

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

using StringList = std::vector<std::string>;
using Target = std::variant<int*, int64_t*, uint64_t*, double*, std::string*, StringList*, bool*>;

struct Field {
  const char* key;  // "section.name"
  Target target;
};

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

const char* type_name(const Target& t) {
  switch (t.index()) {
    case 0:
    case 1:
    case 2:
      return "an integer";
    case 3:
      return "a number";
    case 4:
      return "a string";
    default:
      return "an array of strings";
  }
}

Status bad(const std::string& key, const std::string& why) {
  return Status::invalid("[config] " + key + ": " + why);
}

// Ok when value is one of `allowed`; else bad(key, "'v' is not one of a, b").
Status one_of(const std::string& key, const std::string& value, std::initializer_list<const char*> allowed) {
  std::string names;
  for (const char* a : allowed) {
    if (value == a) return Status::ok();
    names += (names.empty() ? "" : ", ") + std::string(a);
  }
  return bad(key, "'" + value + "' is not one of " + names);
}

// Stores a TOML value into the field, checking its type and range.
Status assign(const Field& f, const toml::node& node) {
  const std::string key = f.key;
  auto wrong_type = [&] {
    return bad(key, std::string("expected ") + type_name(f.target) + ", got " +
                        std::string(toml::impl::node_type_friendly_names[size_t(node.type())]));
  };
  return std::visit(
      [&](auto* dst) -> Status {
        using T = std::remove_pointer_t<decltype(dst)>;
        if constexpr (std::is_same_v<T, std::string>) {
          if (!node.is_string()) return wrong_type();
          *dst = *node.value<std::string>();
        } else if constexpr (std::is_same_v<T, StringList>) {
          if (node.is_string()) {  // one path is a list of one
            *dst = {*node.value<std::string>()};
            return Status::ok();
          }
          const toml::array* arr = node.as_array();
          if (!arr) return wrong_type();
          dst->clear();
          for (const auto& el : *arr) {
            if (!el.is_string()) return wrong_type();
            dst->push_back(*el.value<std::string>());
          }
        } else if constexpr (std::is_same_v<T, bool>) {
          if (!node.is_boolean()) return wrong_type();
          *dst = *node.value<bool>();
        } else if constexpr (std::is_same_v<T, double>) {
          if (node.is_floating_point())
            *dst = *node.value<double>();
          else if (node.is_integer())
            *dst = double(*node.value<int64_t>());
          else
            return wrong_type();
        } else {  // integers
          if (!node.is_integer()) return wrong_type();
          int64_t v = *node.value<int64_t>();
          if (v < int64_t(std::numeric_limits<T>::min()) ||
              (std::is_same_v<T, int> && v > int64_t(std::numeric_limits<int>::max())))
            return bad(key, std::to_string(v) + " is out of range");
          *dst = T(v);
        }
        return Status::ok();
      },
      f.target);
}

const Field* find_field(const std::vector<Field>& fs, const std::string& key) {
  for (const auto& f : fs)
    if (key == f.key) return &f;
  return nullptr;
}

// ", did you mean train.steps?" when `name` is a key of some section.
std::string did_you_mean(const std::vector<Field>& fs, const std::string& name) {
  for (const auto& f : fs) {  // the same last part: "min_words" -> curate.quality.min_words
    std::string key = f.key;
    const std::string last = name.substr(name.rfind('.') + 1);
    if (key.substr(key.rfind('.') + 1) == last) return ", did you mean " + key + "?";
  }
  return "";
}

// True when some key lives under `prefix` ("curate" or "curate.quality").
bool is_section(const std::vector<Field>& fs, const std::string& prefix) {
  for (const auto& f : fs)
    if (std::string(f.key).rfind(prefix + ".", 0) == 0) return true;
  return false;
}

// Walks a table whose path is `prefix` ("" for the document): sub-tables are
// sections ([curate] and [curate.quality] alike), values are keys.
Status apply_table(Config& cfg, const std::vector<Field>& fs, const toml::table& tbl,
                   const std::string& prefix, const std::string& origin) {
  for (const auto& [name, node] : tbl) {
    const std::string path = prefix.empty() ? std::string(name.str()) : prefix + "." + std::string(name.str());
    if (const toml::table* sub = node.as_table()) {
      if (!is_section(fs, path)) {
        if (find_field(fs, path)) return bad(path, "must be a value, not a table (in " + origin + ")");
        return bad(path, "unknown section" + did_you_mean(fs, std::string(name.str())) + " (in " + origin + ")");
      }
      CRUCIBLE_RETURN_IF_ERROR(apply_table(cfg, fs, *sub, path, origin));
      continue;
    }
    if (prefix.empty())
      return bad(path, "must be a [section]" + did_you_mean(fs, path) + " (in " + origin + ")");
    const Field* f = find_field(fs, path);
    if (!f) {
      if (is_section(fs, path)) return bad(path, "must be a [" + path + "] table (in " + origin + ")");
      return bad(path, "unknown key" + did_you_mean(fs, std::string(name.str())) + " (in " + origin + ")");
    }
    CRUCIBLE_RETURN_IF_ERROR(assign(*f, node));
    cfg.explicit_keys.push_back(path);
  }
  return Status::ok();
}

Status apply_table(Config& cfg, const toml::table& root, const std::string& origin) {
  return apply_table(cfg, fields(cfg), root, "", origin);
}

// "--set key=value": the value is read as TOML when it parses as one
// (numbers, booleans, "quoted", [arrays]); a bare word is a string, and for
// array keys a comma-separated list.
Status apply_override(Config& cfg, const std::string& text) {
  auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0)
    return Status::invalid("[config] --set " + text + ": expected key=value");
  std::string key = text.substr(0, eq), value = text.substr(eq + 1);
  auto fs = fields(cfg);
  const Field* f = find_field(fs, key);
  if (!f) {
    std::string name = key.substr(key.find('.') + 1);
    return bad(key, "unknown key" + did_you_mean(fs, name) + " (in --set)");
  }
  cfg.explicit_keys.push_back(key);
  toml::parse_result parsed;
  bool ok = true;
  try {
    parsed = toml::parse("v = " + value);
  } catch (const toml::parse_error&) {
    ok = false;
  }
  if (ok && parsed["v"].node()) {
    const toml::node& n = *parsed["v"].node();
    bool is_text_target = std::holds_alternative<std::string*>(f->target) ||
                          std::holds_alternative<StringList*>(f->target);
    if (!is_text_target || n.is_string() || n.is_array()) return assign(*f, n);
  }
  // A bare word is taken as text: it must be text TOML can hold, or the
  // resolved config.toml could not give it back (found by fuzz/targets.cc).
  size_t repaired = 0;
  (void)data::sanitize_utf8(value, &repaired);
  const bool control = std::any_of(value.begin(), value.end(),
                                   [](char c) { return (unsigned char)c < 0x20 && c != '\t'; });
  if (repaired || control)
    return bad(key, "the value is not valid UTF-8 text (in --set)");
  if (auto* s = std::get_if<std::string*>(&f->target)) {
    **s = value;
    return Status::ok();
  }
  if (auto* l = std::get_if<StringList*>(&f->target)) {
    (*l)->clear();
    std::stringstream ss(value);
    for (std::string item; std::getline(ss, item, ',');)
      if (!item.empty()) (*l)->push_back(item);
    return Status::ok();
  }
  return bad(key, "'" + value + "' is not " + type_name(f->target) + " (in --set)");
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
  if (!(c.fault.hang_timeout_s > 0)) return bad("fault.hang_timeout_s", "must be > 0");
  if (!(c.fault.heartbeat_window_s >= 1 && c.fault.heartbeat_window_s <= 3600))
    return bad("fault.heartbeat_window_s", "must be between 1 and 3600 (heartbeats come every 0.2 s)");
  if (!(c.fault.setup_timeout_s > 0)) return bad("fault.setup_timeout_s", "must be > 0");
  if (c.fault.max_restarts < 0) return bad("fault.max_restarts", "must be >= 0");
  if (!(c.fault.restart_backoff_s >= 0)) return bad("fault.restart_backoff_s", "must be >= 0");
  if (c.fault.shrink_after < 1) return bad("fault.shrink_after", "must be >= 1");
  if (!(c.fault.stop_grace_s > 0)) return bad("fault.stop_grace_s", "must be > 0");
  if (c.run.sample_tokens < 0) return bad("run.sample_tokens", "must be >= 0");
  if (c.run.trace_from < 1) return bad("run.trace_from", "must be >= 1 (a step number)");
  if (c.run.trace_steps < 0) return bad("run.trace_steps", "must be >= 0 (0: no trace)");
  if (!(c.run.probe_max_age_days > 0 && c.run.probe_max_age_days <= 36500))
    return bad("run.probe_max_age_days", "must be > 0 and at most 36500");
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
  toml::table root;
  try {
    root = toml::parse(toml_text, origin);
  } catch (const toml::parse_error& e) {
    return Status::invalid("[config] " + origin + ":" + std::to_string(e.source().begin.line) +
                           ": " + std::string(e.description()));
  }
  CRUCIBLE_RETURN_IF_ERROR(apply_table(cfg, root, origin));
  for (const auto& o : overrides) CRUCIBLE_RETURN_IF_ERROR(apply_override(cfg, o));
  CRUCIBLE_RETURN_IF_ERROR(validate(cfg));
  return cfg;
}

Result<Config> load_config(const std::string& path, const std::vector<std::string>& overrides) {
  if (path.empty()) return parse_config(default_config_toml(), "<default config>", overrides);
  auto text = read_file(path);  // a directory is not an empty config
  if (!text) return Status::invalid("[config] " + text.status().message());
  return parse_config(*text, path, overrides);
}

namespace {

// The table holding `key`'s value, made on the way ("curate.quality.min_words":
// root[curate][quality]); `name` gets the last part.
toml::table& table_for(toml::table& root, const std::string& key, std::string* name) {
  toml::table* t = &root;
  size_t from = 0;
  for (size_t dot; (dot = key.find('.', from)) != std::string::npos; from = dot + 1) {
    const std::string part = key.substr(from, dot - from);
    if (!t->contains(part)) t->insert(part, toml::table{});
    t = (*t)[part].as_table();
  }
  *name = key.substr(from);
  return *t;
}

}  // namespace

namespace {

// How the toml++ library prints a double (it is built without charconv for
// floats: max_digits10 digits, then ".0" when the text has no point).
std::string toml_float_text(double v) {
  std::ostringstream s;
  s.imbue(std::locale::classic());
  s.precision(std::numeric_limits<double>::max_digits10);
  s << v;
  std::string t = s.str();
  if (t.find_first_of(".eE") == std::string::npos) t += ".0";
  return t;
}

}  // namespace

std::string to_toml(const Config& cfg_in) {
  Config cfg = cfg_in;
  toml::table root;
  // Each double's line as toml++ prints it -> in the shortest text that reads
  // back to the same value (core/format.h): "weight_decay = 0.1".
  std::vector<std::pair<std::string, std::string>> floats;
  for (const auto& f : fields(cfg)) {
    std::string name;
    toml::table& t = table_for(root, f.key, &name);
    std::visit(
        [&](auto* v) {
          using T = std::remove_pointer_t<decltype(v)>;
          if constexpr (std::is_same_v<T, StringList>) {
            toml::array arr;
            for (const auto& s : *v) arr.push_back(s);
            t.insert(name, std::move(arr));
          } else if constexpr (std::is_same_v<T, uint64_t>) {
            t.insert(name, int64_t(*v));
          } else if constexpr (std::is_same_v<T, double>) {
            t.insert(name, *v);
            if (std::isfinite(*v)) {
              std::string shortest = format_double(*v);
              if (shortest.find_first_of(".eE") == std::string::npos) shortest += ".0";
              floats.push_back(
                  {name + " = " + toml_float_text(*v) + "\n", name + " = " + shortest + "\n"});
            }
          } else {
            t.insert(name, *v);
          }
        },
        f.target);
  }
  std::ostringstream out;
  out << "# Resolved crucible configuration (every key, defaults included; curation\n"
         "# profile applied). Read back, it resolves to itself.\n"
      << root << "\n";
  std::string text = out.str();
  // The same value either way, so a line of another key that happens to read
  // the same is rewritten correctly too.
  for (const auto& [printed, shortest] : floats)
    for (size_t at = 0; (at = text.find(printed, at)) != std::string::npos;) {
      const bool whole_key =
          at == 0 || text[at - 1] == '\n' || text[at - 1] == ' ' || text[at - 1] == '\t';
      if (!whole_key) {  // "min_lr = ..." when looking for "lr = ..."
        at += printed.size();
        continue;
      }
      text.replace(at, printed.size(), shortest);
      at += shortest.size();
    }
  return text;
}

nlohmann::json to_json(const Config& cfg_in) {
  Config cfg = cfg_in;
  nlohmann::json j = nlohmann::json::object();
  for (const auto& f : fields(cfg)) {
    nlohmann::json* at = &j;
    const std::string key = f.key;
    size_t from = 0;
    for (size_t dot; (dot = key.find('.', from)) != std::string::npos; from = dot + 1)
      at = &(*at)[key.substr(from, dot - from)];
    std::visit([&](auto* v) { (*at)[key.substr(from)] = *v; }, f.target);
  }
  return j;
}

}  // namespace crucible::runtime
