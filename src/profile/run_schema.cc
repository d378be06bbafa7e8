#include "profile/run_schema.h"

#include "core/json_schema.h"

namespace crucible::profile {

namespace {

using nlohmann::json;
using Need = JsonSchema::Need;

constexpr double kMaxSeconds = 1e6;  // one step or phase: 11 days
constexpr double kMaxMs = kMaxSeconds * 1e3;
constexpr double kMaxBytes = 1e18;
constexpr double kMaxRate = 1e15;  // tokens/s
constexpr int64_t kMaxCount = int64_t(1) << 40;

// Every member of the object at `path` a number in [0, hi].
Status numbers_within(const json& j, const JsonSchema& s, const std::string& path, double hi) {
  return s.within(j, path, [hi](const json& o, const JsonSchema& at) {
    for (const auto& [k, v] : o.items()) {
      (void)v;
      CRUCIBLE_RETURN_IF_ERROR(at.number(o, k, 0, hi));
    }
    return Status::ok();
  });
}

}  // namespace

Status check_plan_document(const json& p, const std::string& op, const std::string& source) {
  const JsonSchema s(op, source);
  CRUCIBLE_RETURN_IF_ERROR(s.object(p, ""));
  CRUCIBLE_RETURN_IF_ERROR(s.within(p, "layout", [](const json& l, const JsonSchema& at) {
    for (const char* k : {"dp", "tp", "pp", "v", "mb", "m", "zero"})
      CRUCIBLE_RETURN_IF_ERROR(at.integer(l, k, 0, 1 << 24));
    for (const char* k : {"global_batch", "devices"})
      CRUCIBLE_RETURN_IF_ERROR(at.integer(l, k, 0, kMaxCount));
    for (const char* k : {"recompute", "schedule", "precision", "moments", "grad_dtype", "split"})
      CRUCIBLE_RETURN_IF_ERROR(at.string(l, k));
    return at.boolean(l, "sp");
  }));
  for (const char* k : {"layout_text", "why_not", "no_time_prediction"})
    CRUCIBLE_RETURN_IF_ERROR(s.string(p, k));
  for (const char* k : {"runs", "fits", "cuda_graphs"}) CRUCIBLE_RETURN_IF_ERROR(s.boolean(p, k));
  for (const char* k : {"peak_memory_bytes", "device_memory_bytes"})
    CRUCIBLE_RETURN_IF_ERROR(s.number(p, k, 0, kMaxBytes));
  CRUCIBLE_RETURN_IF_ERROR(s.integer(p, "peak_rank", 0, 1 << 24));
  CRUCIBLE_RETURN_IF_ERROR(numbers_within(p, s, "memory", kMaxBytes));
  for (const char* k : {"step_time_s", "recompute_s"})
    CRUCIBLE_RETURN_IF_ERROR(s.number(p, k, 0, kMaxSeconds));
  CRUCIBLE_RETURN_IF_ERROR(s.number(p, "tokens_per_s", 0, kMaxRate));
  CRUCIBLE_RETURN_IF_ERROR(s.number(p, "mfu", 0, 1e6));
  CRUCIBLE_RETURN_IF_ERROR(s.number(p, "energy_j_per_token", 0, 1e12));
  CRUCIBLE_RETURN_IF_ERROR(s.number(p, "model_flops_per_step", 0, 1e30));
  CRUCIBLE_RETURN_IF_ERROR(numbers_within(p, s, "breakdown", kMaxSeconds));
  // The cluster it was predicted on; null when there was none.
  if (p.contains("cluster") && p["cluster"].is_null()) return Status::ok();
  return s.within(p, "cluster", [](const json& c, const JsonSchema& at) {
    CRUCIBLE_RETURN_IF_ERROR(at.string(c, "name"));
    return at.string(c, "source");
  });
}

Status check_metrics_row(const json& r, const std::string& op, const std::string& source) {
  const JsonSchema s(op, source);
  CRUCIBLE_RETURN_IF_ERROR(s.object(r, ""));
  CRUCIBLE_RETURN_IF_ERROR(s.integer(r, "step", 0, INT64_MAX, Need::kRequired));
  // Figures computed from others are null where they were not finite.
  auto unless_null = [&](const char* k, double lo, double hi) {
    return r.contains(k) && r[k].is_null() ? Status::ok() : s.number(r, k, lo, hi);
  };
  for (const char* k : {"loss", "val_loss", "grad_norm"})
    CRUCIBLE_RETURN_IF_ERROR(unless_null(k, -1e30, 1e30));
  CRUCIBLE_RETURN_IF_ERROR(s.number(r, "lr", -1e6, 1e6));
  CRUCIBLE_RETURN_IF_ERROR(unless_null("tokens_per_s", 0, kMaxRate));
  for (const char* k : {"mfu", "mfu_of_gemm"}) CRUCIBLE_RETURN_IF_ERROR(unless_null(k, 0, 1e6));
  for (const char* k : {"step_ms", "data_wait_ms", "forward_ms", "backward_ms", "optimizer_ms",
                        "comm_ms", "pipeline_wait_ms", "tp_comm_ms", "eval_ms", "ckpt_stall_ms",
                        "ckpt_wait_ms", "ckpt_write_ms", "ckpt_flush_ms", "graph_ms"})
    CRUCIBLE_RETURN_IF_ERROR(s.number(r, k, 0, kMaxMs));
  for (const char* k : {"mem_in_use", "mem_peak", "mem_cached", "comm_bytes"})
    CRUCIBLE_RETURN_IF_ERROR(s.number(r, k, 0, kMaxBytes));
  // Energy (runtime/step_energy.h): present only where a counter was read.
  for (const char* k :
       {"energy_j", "power_w", "j_per_token", "gpu_power_w", "gpu_sm_clock_mhz", "gpu_temp_c"})
    CRUCIBLE_RETURN_IF_ERROR(s.number(r, k, 0, 1e12));
  CRUCIBLE_RETURN_IF_ERROR(s.integer(r, "gpu_throttle", 0, INT64_MAX));
  return Status::ok();
}

Status check_memory_estimate(const json& est, const std::string& op, const std::string& source) {
  const JsonSchema s(op, source);
  CRUCIBLE_RETURN_IF_ERROR(s.object(est, ""));
  for (const char* k : {"precision", "recompute"}) CRUCIBLE_RETURN_IF_ERROR(s.string(est, k));
  for (const char* k : {"weights", "gradients", "optimizer", "activations", "other", "checkpoint_copy"})
    CRUCIBLE_RETURN_IF_ERROR(s.number(est, k, 0, kMaxBytes));
  return Status::ok();
}

Status check_kernels(const json& kernels, const std::string& op, const std::string& source) {
  CRUCIBLE_RETURN_IF_ERROR(JsonSchema(op, source).array(kernels, ""));
  for (size_t i = 0; i < kernels.size(); ++i) {
    const JsonSchema at(op, source, "[" + std::to_string(i) + "].");
    const json& k = kernels[i];
    CRUCIBLE_RETURN_IF_ERROR(at.object(k, ""));
    CRUCIBLE_RETURN_IF_ERROR(at.string(k, "class"));
    for (const char* f : {"flops", "bytes"}) CRUCIBLE_RETURN_IF_ERROR(at.number(k, f, 0, 1e30));
    CRUCIBLE_RETURN_IF_ERROR(at.number(k, "seconds", 0, 1e9));
  }
  return Status::ok();
}

Status check_event_row(const json& row, const std::string& op, const std::string& source) {
  const JsonSchema s(op, source);
  CRUCIBLE_RETURN_IF_ERROR(s.object(row, ""));
  for (const char* k : {"event", "time", "message"}) CRUCIBLE_RETURN_IF_ERROR(s.string(row, k));
  CRUCIBLE_RETURN_IF_ERROR(s.number(row, "t_s", 0, 1e12));
  for (const char* k : {"step", "resume_step", "attempt"})
    CRUCIBLE_RETURN_IF_ERROR(s.integer(row, k, -1, INT64_MAX));
  return Status::ok();
}

bool row_has_parts(const nlohmann::json& row) {
  if (!row.contains("graph_ms")) return true;
  for (const char* k : {"forward_ms", "backward_ms", "optimizer_ms"})
    if (row.value(k, 0.0) > 0) return true;
  return false;
}

}  // namespace crucible::profile
