#include "runtime/resume_check.h"

#include <algorithm>
#include <filesystem>

#include "core/hash.h"
#include "core/json_io.h"

namespace crucible::runtime {

nlohmann::json DataPin::to_json() const {
  return {{"dataset", dataset},
          {"train_xxh64", hex64(train_xxh64)},
          {"val_xxh64", hex64(val_xxh64)},
          {"tokenizer_fingerprint", hex64(tokenizer)}};
}

namespace {

bool parse_hex64(const nlohmann::json& v, uint64_t* out) {
  if (!v.is_string()) return false;
  const std::string s = v.get<std::string>();
  if (s.size() != 16 || s.find_first_not_of("0123456789abcdef") != std::string::npos) return false;
  *out = std::stoull(s, nullptr, 16);
  return true;
}

std::string describe(const DataPin& p) {
  return p.dataset + " (train.tok " + hex64(p.train_xxh64) + ", val.tok " + hex64(p.val_xxh64) +
         ", tokenizer " + hex64(p.tokenizer) + ")";
}

}  // namespace

Result<DataPin> DataPin::from_json(const nlohmann::json& j, const std::string& where) {
  DataPin p;
  if (!j.is_object() || !j.contains("dataset") || !j["dataset"].is_string() ||
      !parse_hex64(j.contains("train_xxh64") ? j["train_xxh64"] : nlohmann::json(), &p.train_xxh64) ||
      !parse_hex64(j.contains("val_xxh64") ? j["val_xxh64"] : nlohmann::json(), &p.val_xxh64) ||
      !parse_hex64(j.contains("tokenizer_fingerprint") ? j["tokenizer_fingerprint"] : nlohmann::json(),
                   &p.tokenizer))
    return Status::corrupt("[ckpt] " + where + ": malformed \"data\" (the dataset pin)");
  p.dataset = j["dataset"].get<std::string>();
  return p;
}

Status check_data_pin(const DataPin& pinned, const DataPin& now, const std::string& ckpt_name) {
  if (pinned.train_xxh64 == now.train_xxh64 && pinned.val_xxh64 == now.val_xxh64 &&
      pinned.tokenizer == now.tokenizer)
    return Status::ok();
  return Status::invalid("[ckpt] " + ckpt_name + " was trained on " + describe(pinned) +
                         ", this run opens " + describe(now) +
                         "; resume on the pinned dataset (drop data.dataset) or start a new run");
}

Status check_tokenizer_pin(const DataPin& pinned, uint64_t fingerprint, const std::string& path,
                           const std::string& ckpt_name) {
  if (pinned.tokenizer == fingerprint) return Status::ok();
  return Status::invalid("[ckpt] " + path + " is not the tokenizer " + ckpt_name +
                         " was trained with (fingerprint " + hex64(fingerprint) + ", the checkpoint's " +
                         hex64(pinned.tokenizer) + ", " + pinned.dataset + "/tokenizer.model)");
}

Status check_resume_config(const nlohmann::json& ckpt_config, const Config& cfg,
                           const std::string& ckpt_name) {
  const nlohmann::json mine = to_json(cfg);
  if (!ckpt_config.is_object()) return Status::ok();  // nothing recorded; the tensors' shapes are checked on load
  // The source of a fine-tuned run (a checkpoint from before [init] existed
  // had none: the default), then the model's shape (one recorded or none).
  const nlohmann::json defaults = to_json(Config{});
  const std::pair<const char*, const char*> pinned[] = {
      {"init", "a resumed run continues from its own checkpoints; start a new run to fine-tune from another"},
      {"model", "a resumed run keeps the model's shape; start a new run to change it"}};
  for (const auto& [section, why] : pinned) {
    const bool recorded = ckpt_config.contains(section) && ckpt_config[section].is_object();
    if (!recorded && std::string(section) == "model") continue;
    const nlohmann::json& theirs_all = recorded ? ckpt_config[section] : defaults[section];
    for (const auto& [key, value] : mine[section].items()) {
      const nlohmann::json theirs = theirs_all.contains(key) ? theirs_all[key] : nlohmann::json();
      if (theirs != value)
        return Status::invalid("[config] " + std::string(section) + "." + key + ": this run asks for " +
                               value.dump() + ", " + ckpt_name + " was trained with " + theirs.dump() + " (" +
                               why + ")");
    }
  }
  return Status::ok();
}

Status check_resume_batch(const nlohmann::json& ckpt_world, int64_t batch_size, int64_t grad_accum,
                          int64_t dp, const std::string& ckpt_name) {
  if (!ckpt_world.is_object() || !ckpt_world.contains("batch_size") ||
      !ckpt_world.contains("grad_accum"))
    return Status::ok();
  const int64_t b = json_int_or(ckpt_world, "batch_size", batch_size),
                a = json_int_or(ckpt_world, "grad_accum", grad_accum);
  const int64_t ranks = json_int_or(ckpt_world, "world_size", 1);
  const int64_t grid =
      std::max<int64_t>(1, json_int_or(ckpt_world, "tp", 1) * json_int_or(ckpt_world, "pp", 1));
  const int64_t d = json_int_or(ckpt_world, "dp", std::max<int64_t>(1, ranks / grid));
  if (b * a * d == batch_size * grad_accum * dp) return Status::ok();
  std::string changed;
  auto note = [&](const char* key, int64_t was, int64_t now) {
    if (was != now)
      changed += (changed.empty() ? "" : ", ") + std::string(key) + " " + std::to_string(was) +
                 " -> " + std::to_string(now);
  };
  note("train.batch_size", b, batch_size);
  note("train.grad_accum", a, grad_accum);
  note("data-parallel ranks", d, dp);
  return Status::invalid("[config] " + changed + ": the global batch would change from " +
                         std::to_string(b * a * d) + " to " +
                         std::to_string(batch_size * grad_accum * dp) + " sequences (" + ckpt_name +
                         " was trained at batch_size " + std::to_string(b) + " x grad_accum " +
                         std::to_string(a) + " x " + std::to_string(d) +
                         " data-parallel ranks); a resumed run keeps its global batch: "
                         "choose train.batch_size and train.grad_accum to give " +
                         std::to_string(b * a * d) + " on these ranks, or start a new run");
}

Result<ResumePoint> find_resume_point(Config& cfg, const std::string& run_dir, const ckpt::VerifyShare* share) {
  auto found = ckpt::find_latest_valid(run_dir + "/ckpt", share);
  if (!found) return found.status();
  const std::string name = std::filesystem::path(found->dir).filename().string();
  CRUCIBLE_RETURN_IF_ERROR(check_resume_config(found->state.config, cfg, name));
  ResumePoint p;
  if (!found->state.data.is_null()) {
    auto pin = DataPin::from_json(found->state.data, found->dir + "/manifest.json");
    if (!pin) return pin.status();
    p.pin = *pin;
    const auto& given = cfg.explicit_keys;
    const bool dataset_given =
        std::find(given.begin(), given.end(), "data.dataset") != given.end() && !cfg.data.dataset.empty();
    if (!dataset_given) cfg.data.dataset = pin->dataset;
  }
  p.checkpoint = std::move(*found);
  return p;
}

}  // namespace crucible::runtime
