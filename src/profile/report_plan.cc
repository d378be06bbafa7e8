// The report's prediction section: what the planner predicted for this run
// before its first step (RUN/plan.json, docs/plan.md) beside what the run
// measured (the medians of metrics.jsonl's phases over the steps after the
// first two), phase by phase, with the error; and the peak memory.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/stats.h"
#include "profile/energy.h"
#include "profile/report_sections.h"
#include "profile/run_schema.h"
#include "profile/svg.h"

namespace crucible::profile {

namespace {

// The median of `key` over the steps after the first two (all steps in a run
// of two). A step replayed from a CUDA graph measured its device time whole
// (graph_ms), and its phases only where the graph times them (run_schema.h
// row_has_parts): a phase's median is over the steps that measured it,
// graph_ms's over the replayed ones, and NaN where there are none.
double median_of(const std::vector<nlohmann::json>& m, const std::string& key) {
  const bool phase = key != "step_ms" && key != "data_wait_ms" && key != "graph_ms";
  auto counts = [&](const nlohmann::json& r) {
    return key == "graph_ms" ? r.contains("graph_ms") : !phase || row_has_parts(r);
  };
  const bool later = std::any_of(m.begin(), m.end(), [](const nlohmann::json& r) {
    return r.value("step", 0) > 2 && r.contains("step_ms");
  });
  std::vector<double> v;
  for (const auto& r : m)
    if ((!later || (r.value("step", 0) > 2 && r.contains("step_ms"))) && counts(r)) v.push_back(r.value(key, 0.0));
  return v.empty() ? std::nan("") : median(std::move(v));
}

std::string error_text(double predicted, double measured) {
  if (!(measured > 0)) return "-";
  return fmt_fixed(100 * (predicted / measured - 1), 1, " %");
}

}  // namespace

std::string prediction_section(const nlohmann::json& plan, const std::vector<nlohmann::json>& m) {
  if (!plan.is_object() || m.empty()) return "";
  std::string body = "<table class=\"kv\">";
  body += kv_row("layout", svg::escape(plan.value("layout_text", std::string("?"))));
  if (plan.contains("cluster") && plan["cluster"].is_object())
    body += kv_row("cluster", svg::escape(plan["cluster"].value("name", std::string("?")) + " (" +
                                          plan["cluster"].value("source", std::string("?")) + ")"));
  double peak = 0;
  for (const auto& r : m) peak = std::max(peak, r.value("mem_peak", 0.0));
  const double mib = 1.0 / (1 << 20), predicted_peak = plan.value("peak_memory_bytes", 0.0);
  body += kv_row("peak memory per rank: predicted / measured",
                 fmt_fixed(predicted_peak * mib, 1, " MiB") + " / " + fmt_fixed(peak * mib, 1, " MiB") + " (" +
                     error_text(predicted_peak, peak) + ")");
  // Energy: the cluster's power at load over the predicted step, against the
  // counter's median step (docs/energy.md); shown where either exists.
  const double e_pred = plan.value("energy_j_per_token", 0.0),
               e_meas = median_column(m, "j_per_token");
  if (e_pred > 0 || std::isfinite(e_meas))
    body += kv_row("energy per token: predicted / measured",
                   (e_pred > 0 ? format_energy_per_token(e_pred)
                               : std::string("- (no power in the cluster file)")) +
                       " / " +
                       (std::isfinite(e_meas) ? format_energy_per_token(e_meas) + " (" +
                                                    error_text(e_pred, e_meas) + ")"
                                              : std::string("not measurable here")));
  if (!plan.contains("breakdown")) {
    body += kv_row("step time", svg::escape(plan.value("no_time_prediction", plan.value("why_not", std::string()))));
    return html_section("prediction", "Prediction against measurement", body + "</table>");
  }
  const nlohmann::json& b = plan["breakdown"];
  auto p = [&](const char* k) { return b.value(k, 0.0) * 1e3; };
  struct Row {
    const char* name;
    double predicted, measured;
  };
  std::vector<Row> rows = {
      {"forward + backward", p("forward") + p("backward") + p("tp_comm"),
       median_of(m, "forward_ms") + median_of(m, "backward_ms")},
      {"optimizer", p("optimizer"), median_of(m, "optimizer_ms")},
      {"data-parallel communication", p("dp_comm"), median_of(m, "comm_ms")},
      {"pipeline wait", p("bubble") + p("pp_comm"), median_of(m, "pipeline_wait_ms")},
      {"data wait", p("data_wait"), median_of(m, "data_wait_ms")},
      {"step", plan.value("step_time_s", 0.0) * 1e3, median_of(m, "step_ms")}};
  // Replayed steps: the device's whole step, launch to read-back.
  const double graph = median_of(m, "graph_ms");
  if (std::isfinite(graph))
    rows.insert(rows.end() - 2, {"device step (CUDA graph)", p("forward") + p("backward") + p("tp_comm") + p("optimizer"), graph});
  body += "</table><table><tr><th>phase</th><th>predicted ms</th><th>measured ms</th><th>error</th></tr>";
  svg::BarChart chart;
  chart.title = "Step time by phase: predicted and measured";
  chart.y_label = "ms per step";
  svg::Series pred, meas;
  pred.name = "predicted", meas.name = "measured";
  for (const Row& r : rows) {
    body += "<tr><td>" + std::string(r.name) + "</td><td>" + fmt_fixed(r.predicted, 1) + "</td><td>" +
            (std::isfinite(r.measured) ? fmt_fixed(r.measured, 1) : std::string("-")) + "</td><td>" +
            error_text(r.predicted, r.measured) + "</td></tr>";
    if (r.predicted > 0 || r.measured > 0) {
      chart.categories.push_back(r.name);
      pred.y.push_back(r.predicted), meas.y.push_back(r.measured);
    }
  }
  chart.series = {pred, meas};
  body += "</table><p class=\"note\">The planner's prediction for this layout, stored before the first step; "
          "<code>crucible plan --calibrate RUN</code> refits the cluster file from runs like this one.</p>";
  return html_section("prediction", "Prediction against measurement", body + svg::render(chart));
}

}  // namespace crucible::profile
