// The report's "energy" section: what the run's steps drew from the hardware's
// own counter (metrics.jsonl's energy_j, power_w, j_per_token; on a GPU its
// power, SM clock, temperature and throttle reasons per step), or, where no
// counter could be read, the log's line saying why.
#include <cmath>
#include <fstream>
#include <map>

#include "profile/energy.h"
#include "profile/nvml.h"
#include "profile/report_sections.h"

// Charts from designated initializers: the members left out have defaults.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace crucible::profile {

using nlohmann::json;

namespace {

std::vector<double> col(const std::vector<json>& m, const char* key, std::vector<double>* steps) {
  std::vector<double> y;
  steps->clear();
  for (const json& r : m) {
    const double v = num(r, key);
    if (!std::isfinite(v)) continue;
    steps->push_back(num(r, "step"));
    y.push_back(v);
  }
  return y;
}

// The first "[energy]" line of RUN/log.txt: where the run said what it measured.
std::string energy_log_line(const std::string& run_dir) {
  std::ifstream in(run_dir + "/log.txt");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("[energy]", 0) == 0) return line;
  return "";
}

}  // namespace

std::string energy_section(const std::string& run_dir, const std::vector<json>& m) {
  double joules = 0, tokens_j = 0, ms = 0;
  int rows = 0;
  for (const json& r : m) {
    const double e = num(r, "energy_j");
    if (!std::isfinite(e)) continue;
    joules += e;
    ms += num(r, "step_ms");
    tokens_j += num(r, "j_per_token") > 0 ? e / num(r, "j_per_token") : 0;
    ++rows;
  }
  const std::string said = energy_log_line(run_dir);
  if (rows == 0)
    return html_section(
        "energy", "Energy",
        "<p class=\"note\">Not measured: " +
            svg::escape(said.empty() ? "no energy counter was read (log.txt has no [energy] line)"
                                     : said) +
            "</p>");
  std::string body = "<table>";
  body += kv_row("source", said.empty() ? "-" : said);
  body += kv_row("energy over the steps", fmt_fixed(joules * 1e-3, 3, " kJ") + " (" +
                                              std::to_string(rows) + " steps, " +
                                              fmt_fixed(ms * 1e-3, 1, " s") + ")");
  body += kv_row("mean power", fmt_fixed(ms > 0 ? joules / (ms * 1e-3) : NAN, 1, " W"));
  body += kv_row("energy per token (median step)",
                 format_energy_per_token(median_column(m, "j_per_token")));
  if (tokens_j > 0)
    body += kv_row("tokens per kWh", fmt_fixed(tokens_j / joules * 3.6e6 * 1e-6, 2, " M"));
  body += "</table>";

  std::vector<double> x;
  svg::Chart p{.title = "Power", .x_label = "step", .y_label = "W"};
  std::vector<double> y = col(m, "power_w", &x);
  p.series.push_back({.name = "power_w (step mean)", .x = x, .y = y});
  y = col(m, "gpu_power_w", &x);
  if (!y.empty())
    p.series.push_back({.name = "gpu_power_w (at step end)", .x = x, .y = y, .dashed = true});
  body += svg::render(p);
  y = col(m, "gpu_sm_clock_mhz", &x);
  if (!y.empty()) {
    svg::Chart c{.title = "GPU SM clock", .x_label = "step", .y_label = "MHz"};
    c.series.push_back({.name = "gpu_sm_clock_mhz", .x = x, .y = y});
    // Throttle events: a marker at each step whose reasons changed.
    std::string last;
    std::map<std::string, int> counts;
    for (const json& r : m) {
      const double bits = num(r, "gpu_throttle");
      if (!std::isfinite(bits)) continue;
      std::string names;
      for (const std::string& n : throttle_names(uint64_t(bits)))
        names += (names.empty() ? "" : ",") + n;
      if (!names.empty()) ++counts[names];
      if (names != last && !names.empty())
        c.markers.push_back({.x = num(r, "step"), .label = names, .color = "#e15759"});
      last = names;
    }
    body += svg::render(c);
    y = col(m, "gpu_temp_c", &x);
    svg::Chart t{.title = "GPU temperature", .x_label = "step", .y_label = "°C"};
    t.series.push_back({.name = "gpu_temp_c", .x = x, .y = y});
    body += svg::render(t);
    if (counts.empty()) {
      body +=
          "<p class=\"note\">No throttling: the GPU ran at the clocks it may at every step's "
          "end.</p>";
    } else {
      body += "<table><tr><th>throttle reasons</th><td>steps</td></tr>";
      for (const auto& [n, c] : counts) body += kv_row(n, std::to_string(c));
      body += "</table>";
    }
  }
  return html_section("energy", "Energy", body);
}

}  // namespace crucible::profile
