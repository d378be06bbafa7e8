// The report's memory estimate table: what the run said it would need per
// rank before it started (RUN/memory.json, written by the trainer from
// runtime/memory_estimate.h), by kind, beside what the allocator measured.
#include <cmath>
#include <cstdio>
#include <utility>
#include <vector>

#include "profile/report_sections.h"

namespace crucible::profile {

std::string fmt_fixed(double v, int digits, const std::string& unit) {
  if (!std::isfinite(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf + unit;
}

std::string memory_estimate_table(const nlohmann::json& est, double measured_peak) {
  if (!est.is_object()) return "";
  const double mib = 1.0 / (1 << 20);
  const bool bf16 = est.value("precision", std::string()) == "bf16";
  const std::vector<std::pair<const char*, const char*>> kinds = {
      {"weights", bf16 ? "weights (f32 and the bf16 copy)" : "weights"},
      {"gradients", "gradients"},
      {"optimizer", "optimizer"},
      {"activations", "activations"},
      {"other", "other"},
      {"checkpoint_copy", "checkpoint copy"}};
  std::string table = "<table class=\"kv\">";
  double total = 0;
  for (const auto& [key, label] : kinds) {
    const double b = est.value(key, 0.0);
    total += b;
    table += kv_row(std::string("estimated ") + label, fmt_fixed(b * mib, 1, " MiB"));
  }
  table += kv_row("estimated total", fmt_fixed(total * mib, 1, " MiB"));
  table += kv_row("measured allocator peak", fmt_fixed(measured_peak * mib, 1, " MiB"));
  table += kv_row("precision, recompute",
                  est.value("precision", std::string("?")) + ", " + est.value("recompute", std::string("?")));
  return table + "</table>";
}

}  // namespace crucible::profile
