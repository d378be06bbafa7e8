// A small SVG plotting kit for `crucible report`: line charts with several
// series, stacked areas, scatter points, log-log axes (roofline, scaling) and
// grouped bar charts, each returned as one self-contained inline <svg> string.
//
// Every series is drawn inside <g class="series" data-series="NAME">, so a
// test (or a person with the browser's inspector) finds each series by name.
// Values that are not finite, and non-positive values on a log axis, are
// skipped (a gap in a line), so the output never contains "nan" or "inf".
// All text is XML-escaped. Pure functions: thread-safe.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace crucible::profile::svg {

enum class Kind {
  kLine,     // a polyline through (x[i], y[i])
  kPoints,   // a dot per point (titles from `labels` when given)
  kStacked,  // a filled band stacked on the kStacked series before it
};

struct Series {
  std::string name;
  std::vector<double> x, y;
  Kind kind = Kind::kLine;
  bool dashed = false;
  std::string color;                // empty: the palette's next colour
  std::vector<std::string> labels;  // kPoints: a <title> per point
};

// A vertical line at x across the plot (events, checkpoint stalls).
struct Marker {
  double x = 0;
  std::string label;  // shown as the line's <title>
  std::string color = "#888";
};

struct Chart {
  std::string title, x_label, y_label;
  bool log_x = false, log_y = false;
  bool y_from_zero = true;  // linear y axis: include 0
  int width = 760, height = 300;
  std::vector<Series> series;
  std::vector<Marker> markers;
};

// Bars: one group per category, one bar per series in each group.
struct BarChart {
  std::string title, y_label;
  std::vector<std::string> categories;
  std::vector<Series> series;  // y[i]: the value for categories[i]; x unused
  int width = 760, height = 300;
};

std::string render(const Chart& chart);
std::string render(const BarChart& chart);

// Text safe inside XML/HTML elements and attribute values.
std::string escape(std::string_view text);
// A number for display: 4 significant digits, SI-free ("1.25e+06" style only
// beyond 1e6); "-" when not finite.
std::string format_number(double v);

// Tick positions covering [lo, hi]: "nice" steps (1, 2, 5 x 10^k) on a linear
// axis, powers of ten on a log axis. Exposed for tests.
std::vector<double> ticks(double lo, double hi, bool log);

}  // namespace crucible::profile::svg
