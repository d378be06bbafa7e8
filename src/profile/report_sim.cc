// The report of a `crucible sim` run: what it computed (results.json), how
// its figures moved over the steps (metrics.jsonl), where its time went
// (trace.json, by event), the workload's maps (climate's height fields) and
// what the supervisor did (events.jsonl).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include "core/format.h"
#include "profile/report_sections.h"

#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace crucible::profile {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using svg::escape;
using svg::format_number;

// The members of results.json worth a table row: numbers, strings, booleans,
// and nested objects flattened one level ("case2.l2"); arrays are left out.
std::string results_table(const json& results) {
  std::string rows;
  auto cell = [](const json& v) -> std::string {
    if (v.is_number()) return format_number(v.get<double>());
    if (v.is_string()) return v.get<std::string>();
    if (v.is_boolean()) return v.get<bool>() ? "yes" : "no";
    return "";
  };
  for (const auto& [k, v] : results.items()) {
    if (v.is_object()) {
      for (const auto& [k2, v2] : v.items())
        if (!v2.is_structured()) rows += kv_row(k + "." + k2, cell(v2));
    } else if (!v.is_structured()) {
      rows += kv_row(k, cell(v));
    }
  }
  return rows.empty() ? "" : "<table>" + rows + "</table>";
}

// One chart per numeric metric (the driver's timings last).
std::string metric_charts(const std::vector<json>& m) {
  std::vector<std::string> names;
  for (const json& row : m)
    for (const auto& [k, v] : row.items())
      if (v.is_number() && k != "step" && k != "elapsed_s" &&
          std::find(names.begin(), names.end(), k) == names.end())
        names.push_back(k);
  std::stable_partition(names.begin(), names.end(), [](const std::string& n) { return n != "step_ms"; });
  std::string html;
  for (const std::string& name : names) {
    svg::Series s{name};
    for (const json& row : m)
      if (row.contains(name) && row[name].is_number()) {
        s.x.push_back(row.value("step", 0.0));
        s.y.push_back(row[name].get<double>());
      }
    if (s.x.size() < 2) continue;
    html += svg::render(svg::Chart{.title = name, .x_label = "step", .y_label = name, .y_from_zero = false,
                                   .height = 220, .series = {s}});
  }
  return html;
}

// Time by trace event name (rank 0's process), largest first.
std::string time_breakdown(const json& trace) {
  if (!trace.is_object() || !trace.contains("traceEvents")) return "";
  std::map<std::string, double> ms;
  for (const json& e : trace["traceEvents"]) {
    if (!e.is_object() || e.value("ph", "") != "X" || e.value("pid", 0) != 0) continue;
    const std::string name = e.value("name", "");
    if (name == "step") continue;  // the whole; its parts are the workload's events
    ms[name] += e.value("dur", 0.0) * 1e-3;
  }
  if (ms.empty()) return "";
  std::vector<std::pair<std::string, double>> sorted(ms.begin(), ms.end());
  std::sort(sorted.begin(), sorted.end(), [](auto& a, auto& b) { return a.second > b.second; });
  svg::BarChart bars{.title = "time in the traced steps, by event (rank 0)", .y_label = "ms"};
  svg::Series s{"ms"};
  for (const auto& [n, v] : sorted) {
    bars.categories.push_back(n);
    s.y.push_back(v);
  }
  bars.series = {s};
  return svg::render(bars);
}

// A value in [0, 1] as a blue-to-red colour.
std::string ramp(double t) {
  t = std::clamp(std::isfinite(t) ? t : 0.0, 0.0, 1.0);
  const int r = int(40 + 215 * t), g = int(60 + 140 * (1 - std::fabs(2 * t - 1))), b = int(255 - 215 * t);
  char c[8];
  std::snprintf(c, sizeof c, "#%02x%02x%02x", r, g, b);
  return c;
}

// A field on a latitude-longitude grid (row-major, south to north) as a
// heat map, at most 36 x 72 cells (averaged down).
std::string map_svg(const json& map) {
  const int nlat = int(map.value("nlat", 0)), nlon = int(map.value("nlon", 0));
  if (nlat <= 0 || nlon <= 0 || !map.contains("values") || !map["values"].is_array() ||
      map["values"].size() != size_t(nlat) * size_t(nlon))
    return "<p class=\"note\">a map with inconsistent sizes was left out</p>";
  const int fy = (nlat + 35) / 36, fx = (nlon + 71) / 72;
  const int ny = nlat / fy, nx = nlon / fx;
  std::vector<double> v(size_t(ny) * nx, 0);
  double lo = INFINITY, hi = -INFINITY;
  for (int j = 0; j < ny; ++j)
    for (int i = 0; i < nx; ++i) {
      double sum = 0;
      for (int a = 0; a < fy; ++a)
        for (int b = 0; b < fx; ++b) sum += map["values"][size_t(j * fy + a) * nlon + size_t(i * fx + b)].get<double>();
      double x = sum / (fy * fx);
      v[size_t(j) * nx + i] = x;
      lo = std::min(lo, x), hi = std::max(hi, x);
    }
  const int cell = std::max(4, 720 / nx), W = nx * cell, H = ny * cell;
  std::string out = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(W + 120) + "\" height=\"" +
                    std::to_string(H + 30) + "\">";
  for (int j = 0; j < ny; ++j)
    for (int i = 0; i < nx; ++i) {
      const double t = hi > lo ? (v[size_t(j) * nx + i] - lo) / (hi - lo) : 0.5;
      out += "<rect x=\"" + std::to_string(i * cell) + "\" y=\"" + std::to_string((ny - 1 - j) * cell) +
             "\" width=\"" + std::to_string(cell) + "\" height=\"" + std::to_string(cell) + "\" fill=\"" + ramp(t) +
             "\"/>";
    }
  const std::string units = map.value("units", "");
  out += "<text x=\"" + std::to_string(W + 8) + "\" y=\"14\" font-size=\"12\">" + escape(format_number(hi) + " " + units) +
         "</text><text x=\"" + std::to_string(W + 8) + "\" y=\"" + std::to_string(H) + "\" font-size=\"12\">" +
         escape(format_number(lo) + " " + units) + "</text>";
  out += "<text x=\"0\" y=\"" + std::to_string(H + 20) + "\" font-size=\"12\">" +
         escape(map.value("field", std::string("field")) + " at " + format_number(map.value("time_h", 0.0)) +
                " h (longitude across, latitude up)") +
         "</text></svg>";
  return out;
}

}  // namespace

Result<std::string> sim_report(const std::string& run_dir) {
  const std::string name = fs::path(run_dir).lexically_normal().filename().string();
  auto info = read_optional_json(run_dir + "/sim.json");
  if (!info) return info.status();
  auto results = read_optional_json(run_dir + "/results.json");
  if (!results) return results.status();
  std::vector<json> m;
  std::error_code ec;
  if (fs::exists(run_dir + "/metrics.jsonl", ec)) {
    auto rows = read_jsonl(run_dir + "/metrics.jsonl");
    if (!rows) return rows.status();
    m = std::move(*rows);
  }
  auto trace = read_optional_json(run_dir + "/trace.json");
  if (!trace) return trace.status();

  const std::string workload = info->value("workload", std::string("?"));
  const int64_t total = info->value("total_steps", int64_t(0));
  const int64_t done = m.empty() ? 0 : m.back().value("step", int64_t(0));
  std::string html = page_head(name);
  std::string summary = kv_row("workload", workload) + kv_row("steps", std::to_string(done) + " of " + std::to_string(total)) +
                        kv_row("status", results->is_null() ? "not finished (no results.json yet)" : "finished");
  if (!m.empty()) summary += kv_row("elapsed", format_number(m.back().value("elapsed_s", 0.0)) + " s");
  if (results->is_object()) {
    summary += kv_row("ranks x threads", std::to_string(results->value("ranks", 0)) + " x " +
                                             std::to_string(results->value("threads", 0)));
  }
  html += html_section("summary", "Summary", "<table>" + summary + "</table>");
  if (results->is_object()) html += html_section("results", "Results", results_table(*results));
  if (results->is_object() && results->contains("maps") && (*results)["maps"].is_array()) {
    std::string maps;
    for (const json& map : (*results)["maps"]) maps += map_svg(map);
    html += html_section("maps", "Maps", maps);
  }
  if (!m.empty()) html += html_section("metrics", "Over the run", metric_charts(m));
  const std::string breakdown = time_breakdown(*trace);
  if (!breakdown.empty()) html += html_section("time", "Where the time went", breakdown);
  if (fs::exists(run_dir + "/events.jsonl", ec)) {
    auto events = read_jsonl(run_dir + "/events.jsonl");
    if (!events) return events.status();
    std::string rows;
    for (const json& e : *events) {
      json fields = e;
      for (const char* k : {"time", "t_s", "event"}) fields.erase(k);
      rows += kv_row(e.value("time", std::string("")), e.value("event", std::string("")) + " " + fields.dump());
    }
    if (!rows.empty()) html += html_section("events", "Supervisor events", "<table>" + rows + "</table>");
  }
  return html + "</body></html>\n";
}

}  // namespace crucible::profile
