// The report's pipeline timeline: one row per rank of the last traced step's
// pipeline schedule (RUN/trace.json, category "pipeline": one event per
// schedule action, parallel/pipeline.cc), each action a bar on a common time
// axis, so the bubble is where a row is grey (waiting in a receive) or empty.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>

#include "core/file_io.h"
#include "core/json_io.h"
#include "profile/report_sections.h"
#include "profile/trace_file.h"

namespace crucible::profile {

namespace {

struct Bar {
  double t0, t1;  // ms from the window's start
  std::string op;
};

const char* color_of(const std::string& op) {
  if (op == "F") return "#4c78a8";
  if (op == "B") return "#59a14f";
  if (op == "Bi") return "#8cd17d";
  if (op == "Bw") return "#b6992d";
  if (op.rfind("recv", 0) == 0) return "#d9d9d9";  // waiting for another stage
  return "#f28e2b";                                // sends (short)
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

// RUN/trace.json's events, checked by validate_trace (every event an object
// with its typed fields; profile/trace_file.h) before any is used: a trace
// that is no trace is one line naming it, not a json::type_error. Absent: none.
Result<nlohmann::json> read_trace_events(const std::string& run_dir) {
  const std::string path = run_dir + "/trace.json";
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return nlohmann::json::array();
  auto text = read_file(path);
  if (!text) return Status::invalid("[report] " + text.status().message());
  nlohmann::json doc = nlohmann::json::parse(*text, nullptr, false);
  if (doc.is_discarded()) return Status::corrupt("[report] " + path + ": not valid JSON");
  if (Status v = validate_trace(doc); !v) {
    std::string why = v.message();
    if (why.rfind("[trace] ", 0) == 0) why = why.substr(8);
    return Status::corrupt("[report] " + path + ": " + why);
  }
  return doc.is_array() ? std::move(doc) : std::move(doc["traceEvents"]);
}

}  // namespace

Result<std::string> pipeline_section(const std::string& run_dir) {
  auto events = read_trace_events(run_dir);
  if (!events) return events.status();
  auto cat = [](const nlohmann::json& e) { return json_string_or(e, "cat", ""); };
  // Each rank's last "pipeline schedule" phase is its window.
  std::map<int, std::pair<double, double>> window;  // pid -> [ts, ts + dur] (µs)
  for (const auto& e : *events)
    if (cat(e) == "phase" && e.value("name", "") == "pipeline schedule" &&
        e.value("ph", "") == "X") {
      const double ts = e.value("ts", 0.0);
      auto& w = window[e.value("pid", 0)];
      if (ts >= w.first) w = {ts, ts + e.value("dur", 0.0)};
    }
  if (window.empty()) return std::string();
  double origin = 1e300, end = 0;
  for (const auto& [pid, w] : window) origin = std::min(origin, w.first), end = std::max(end, w.second);
  std::map<int, std::vector<Bar>> rows;
  for (const auto& e : *events) {
    if (cat(e) != "pipeline" || e.value("ph", "") != "X") continue;
    const int pid = e.value("pid", 0);
    auto w = window.find(pid);
    const double ts = e.value("ts", 0.0), dur = e.value("dur", 0.0);
    if (w == window.end() || ts < w->second.first || ts > w->second.second) continue;
    rows[pid].push_back({(ts - origin) / 1e3, (ts + dur - origin) / 1e3, e.value("name", "")});
  }
  const double span_ms = std::max(1e-3, (end - origin) / 1e3);
  const int left = 70, width = 760, plot = width - left - 20, row_h = 26, top = 10;
  const int height = top + int(rows.size()) * row_h + 40;
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(width) + "\" height=\"" +
                    std::to_string(height) + "\" font-family=\"sans-serif\" font-size=\"11\">";
  int i = 0;
  for (const auto& [pid, bars] : rows) {
    const int y = top + i++ * row_h;
    svg += "<text x=\"4\" y=\"" + std::to_string(y + 16) + "\">rank " + std::to_string(pid) + "</text>";
    svg += "<g class=\"series\" data-series=\"rank " + std::to_string(pid) + "\">";
    for (const Bar& b : bars) {
      const double x0 = left + plot * b.t0 / span_ms, w = std::max(0.5, plot * (b.t1 - b.t0) / span_ms);
      svg += "<rect x=\"" + num(x0) + "\" y=\"" + std::to_string(y + 3) + "\" width=\"" + num(w) +
             "\" height=\"" + std::to_string(row_h - 6) + "\" fill=\"" + color_of(b.op) + "\"><title>" +
             svg::escape(b.op) + " " + num(b.t0) + "–" + num(b.t1) + " ms</title></rect>";
    }
    svg += "</g>";
  }
  const int axis_y = top + int(rows.size()) * row_h + 14;
  svg += "<text x=\"" + std::to_string(left) + "\" y=\"" + std::to_string(axis_y) + "\">0</text>";
  svg += "<text x=\"" + std::to_string(left + plot - 60) + "\" y=\"" + std::to_string(axis_y) + "\">" +
         num(span_ms) + " ms</text>";
  int lx = left;
  for (const char* op : {"F", "B", "Bi", "Bw", "recv (waiting)"}) {
    svg += "<rect x=\"" + std::to_string(lx) + "\" y=\"" + std::to_string(axis_y + 8) +
           "\" width=\"10\" height=\"10\" fill=\"" + color_of(op) + "\"/><text x=\"" + std::to_string(lx + 14) +
           "\" y=\"" + std::to_string(axis_y + 17) + "\">" + op + "</text>";
    lx += 90;
  }
  svg += "</svg>";
  const std::string note =
      "<p>The last traced step's pipeline schedule, one row per rank (F forward, B backward, Bi / Bw its input "
      "and weight halves under ZB-H1, grey: blocked in a receive, waiting for another stage). Per step, "
      "<code>pipeline_wait_ms</code> in each rank's metrics is the grey total.</p>";
  return html_section("pipeline", "Pipeline timeline", svg + note);
}

}  // namespace crucible::profile
