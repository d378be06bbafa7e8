#include "profile/svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace crucible::profile::svg {
namespace {

// Tableau 10: distinguishable, and readable on white.
constexpr const char* kPalette[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                    "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
constexpr int kLeft = 70, kRight = 16, kTop = 44, kBottom = 46;

std::string num(double v) {  // a coordinate: finite by construction
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", std::isfinite(v) ? v : 0.0);
  return buf;
}

std::string color_of(const Series& s, size_t i) {
  return s.color.empty() ? kPalette[i % std::size(kPalette)] : s.color;
}

bool usable(double v, bool log) { return std::isfinite(v) && (!log || v > 0); }

// One axis: data range -> pixel range, linear or log10.
struct Scale {
  double lo = 0, hi = 1;  // data units, after widening to the ticks
  bool log = false;
  double p0 = 0, p1 = 1;  // pixels for lo and hi
  std::vector<double> tick_values;

  double t(double v) const { return log ? std::log10(v) : v; }
  double operator()(double v) const {
    const double a = t(lo), b = t(hi);
    return p0 + (t(v) - a) / (b - a) * (p1 - p0);
  }
};

Scale make_scale(double lo, double hi, bool log, double p0, double p1) {
  Scale s;
  s.log = log;
  if (!(lo <= hi)) {  // no data
    lo = log ? 1 : 0;
    hi = log ? 10 : 1;
  }
  if (lo == hi) {
    if (log) {
      lo /= 2, hi *= 2;
    } else {
      const double d = lo == 0 ? 1 : std::abs(lo) * 0.1;
      lo -= d, hi += d;
    }
  }
  s.tick_values = ticks(lo, hi, log);
  // Widen to the outer ticks so the plot ends on a labelled value.
  s.lo = std::min(lo, s.tick_values.front());
  s.hi = std::max(hi, s.tick_values.back());
  s.p0 = p0, s.p1 = p1;
  return s;
}

void extend(double& lo, double& hi, double v, bool log) {
  if (!usable(v, log)) return;
  lo = std::min(lo, v), hi = std::max(hi, v);
}

std::string text(double x, double y, const std::string& s, const char* anchor, int size = 11,
                 const std::string& extra = "") {
  return "<text x=\"" + num(x) + "\" y=\"" + num(y) + "\" text-anchor=\"" + anchor +
         "\" font-size=\"" + std::to_string(size) + "\"" + extra + ">" + escape(s) + "</text>";
}

std::string open_svg(int w, int h, const std::string& title) {
  std::string out = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(w) +
                    "\" height=\"" + std::to_string(h) + "\" viewBox=\"0 0 " + std::to_string(w) +
                    " " + std::to_string(h) + "\" font-family=\"sans-serif\" role=\"img\"><title>" +
                    escape(title) + "</title>";
  out += "<rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>";
  out += text(w / 2.0, 16, title, "middle", 13, " font-weight=\"bold\"");
  return out;
}

// Legend swatches in a row under the title, wrapping when full.
std::string legend(const std::vector<Series>& series, int width) {
  std::string out = "<g class=\"legend\">";
  double x = kLeft, y = 30;
  for (size_t i = 0; i < series.size(); ++i) {
    const double w = 22 + 6.5 * series[i].name.size() + 14;
    if (x + w > width - kRight && x > kLeft) x = kLeft, y += 14;
    out += "<rect x=\"" + num(x) + "\" y=\"" + num(y - 8) + "\" width=\"14\" height=\"8\" fill=\"" +
           color_of(series[i], i) + "\"/>";
    out += text(x + 18, y, series[i].name, "start");
    x += w;
  }
  return out + "</g>";
}

std::string axes(const Scale& xs, const Scale& ys, const std::string& x_label,
                 const std::string& y_label, int w, int h, bool x_ticks) {
  std::string out = "<g class=\"axes\" stroke=\"#ccc\" stroke-width=\"1\">";
  for (double v : ys.tick_values)
    out += "<line x1=\"" + num(xs.p0) + "\" x2=\"" + num(xs.p1) + "\" y1=\"" + num(ys(v)) +
           "\" y2=\"" + num(ys(v)) + "\"/>";
  out += "</g><g class=\"ticks\" fill=\"#333\">";
  for (double v : ys.tick_values) out += text(xs.p0 - 5, ys(v) + 4, format_number(v), "end");
  if (x_ticks)
    for (double v : xs.tick_values) out += text(xs(v), ys.p0 + 15, format_number(v), "middle");
  out += "</g>";
  out += "<rect x=\"" + num(xs.p0) + "\" y=\"" + num(ys.p1) + "\" width=\"" + num(xs.p1 - xs.p0) +
         "\" height=\"" + num(ys.p0 - ys.p1) + "\" fill=\"none\" stroke=\"#333\"/>";
  out += text((xs.p0 + xs.p1) / 2, h - 8, x_label, "middle", 12);
  const double yc = (ys.p0 + ys.p1) / 2;
  out += text(14, yc, y_label, "middle", 12, " transform=\"rotate(-90 14 " + num(yc) + ")\"");
  (void)w;
  return out;
}

std::string group_open(const Series& s, const char* kind) {
  return "<g class=\"series " + std::string(kind) + "\" data-series=\"" + escape(s.name) + "\">";
}

}  // namespace

std::string escape(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  for (char c : in) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string format_number(double v) {
  if (!std::isfinite(v)) return "-";
  if (v == 0) return "0";
  char buf[32];
  const double a = std::abs(v);
  if (a >= 1e6 || a < 1e-3)
    std::snprintf(buf, sizeof buf, "%.3g", v);
  else
    std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

std::vector<double> ticks(double lo, double hi, bool log) {
  std::vector<double> out;
  if (!std::isfinite(lo) || !std::isfinite(hi) || lo > hi) return {0, 1};
  if (log) {
    if (lo <= 0) lo = std::numeric_limits<double>::min();
    const int a = int(std::floor(std::log10(lo) + 1e-9)), b = int(std::ceil(std::log10(hi) - 1e-9));
    const int step = std::max(1, (b - a + 7) / 8);  // at most ~8 labels
    for (int e = a; e <= b + step - 1; e += step) {
      out.push_back(std::pow(10.0, e));
      if (e >= b) break;
    }
    if (out.size() < 2) out.push_back(out.back() * 10);
    return out;
  }
  if (lo == hi) hi = lo + 1;
  const double raw = (hi - lo) / 5;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double f = raw / mag;
  const double step = (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * mag;
  const double first = std::floor(lo / step + 1e-9) * step;
  for (int i = 0; i < 64; ++i) {
    double v = first + i * step;
    if (std::abs(v) < step * 1e-9) v = 0;  // -0 and 1e-17 print as "0"
    out.push_back(v);
    if (v >= hi - step * 1e-9) break;
  }
  return out;
}

std::string render(const Chart& c) {
  const bool logx = c.log_x, logy = c.log_y;
  const double inf = std::numeric_limits<double>::infinity();
  double xlo = inf, xhi = -inf, ylo = inf, yhi = -inf;
  // Stacked bands: cumulative tops, by point index, in series order.
  std::vector<double> cum;
  std::vector<std::vector<double>> tops(c.series.size());
  for (size_t i = 0; i < c.series.size(); ++i) {
    const Series& s = c.series[i];
    const size_t n = std::min(s.x.size(), s.y.size());
    for (size_t k = 0; k < n; ++k) extend(xlo, xhi, s.x[k], logx);
    if (s.kind == Kind::kStacked) {
      if (cum.size() < n) cum.resize(n, 0.0);
      tops[i].resize(n);
      for (size_t k = 0; k < n; ++k) {
        if (std::isfinite(s.y[k])) cum[k] += s.y[k];
        tops[i][k] = cum[k];
        extend(ylo, yhi, cum[k], logy);
      }
    } else {
      for (size_t k = 0; k < n; ++k) extend(ylo, yhi, s.y[k], logy);
    }
  }
  for (const Marker& m : c.markers) extend(xlo, xhi, m.x, logx);
  if (!logy && c.y_from_zero && ylo <= yhi) ylo = std::min(ylo, 0.0), yhi = std::max(yhi, 0.0);

  const Scale xs = make_scale(xlo, xhi, logx, kLeft, c.width - kRight);
  const Scale ys = make_scale(ylo, yhi, logy, c.height - kBottom, kTop);
  std::string out = open_svg(c.width, c.height, c.title);
  out += legend(c.series, c.width);
  out += axes(xs, ys, c.x_label, c.y_label, c.width, c.height, true);

  std::vector<double> prev_top;
  for (size_t i = 0; i < c.series.size(); ++i) {
    const Series& s = c.series[i];
    const std::string col = color_of(s, i);
    const size_t n = std::min(s.x.size(), s.y.size());
    if (s.kind == Kind::kStacked) {
      out += group_open(s, "stacked");
      std::string d;
      std::vector<size_t> idx;
      for (size_t k = 0; k < n; ++k)
        if (usable(s.x[k], logx)) idx.push_back(k);
      for (size_t j = 0; j < idx.size(); ++j)
        d += (j ? " L" : "M") + num(xs(s.x[idx[j]])) + " " + num(ys(tops[i][idx[j]]));
      for (size_t j = idx.size(); j-- > 0;) {
        const size_t k = idx[j];
        const double base = k < prev_top.size() ? prev_top[k] : (logy ? ys.lo : 0.0);
        d += " L" + num(xs(s.x[k])) + " " + num(ys(std::max(base, ys.lo)));
      }
      if (!idx.empty())
        out += "<path d=\"" + d + " Z\" fill=\"" + col + "\" fill-opacity=\"0.85\" stroke=\"" +
               col + "\" stroke-width=\"0.5\"/>";
      out += "</g>";
      prev_top = tops[i];
    } else if (s.kind == Kind::kPoints) {
      out += group_open(s, "points");
      for (size_t k = 0; k < n; ++k) {
        if (!usable(s.x[k], logx) || !usable(s.y[k], logy)) continue;
        out += "<circle cx=\"" + num(xs(s.x[k])) + "\" cy=\"" + num(ys(s.y[k])) +
               "\" r=\"4\" fill=\"" + col + "\">";
        if (k < s.labels.size()) out += "<title>" + escape(s.labels[k]) + "</title>";
        out += "</circle>";
      }
      out += "</g>";
    } else {
      out += group_open(s, "line");
      std::string d;
      bool pen_down = false;
      size_t points = 0;
      for (size_t k = 0; k < n; ++k) {
        if (!usable(s.x[k], logx) || !usable(s.y[k], logy)) {
          pen_down = false;
          continue;
        }
        d += (pen_down ? " L" : (d.empty() ? "M" : " M")) + num(xs(s.x[k])) + " " + num(ys(s.y[k]));
        pen_down = true;
        ++points;
      }
      if (!d.empty())
        out += "<path d=\"" + d + "\" fill=\"none\" stroke=\"" + col + "\" stroke-width=\"1.8\"" +
               (s.dashed ? " stroke-dasharray=\"6 4\"" : "") + "/>";
      // A lone point draws no visible line: mark it.
      if (points == 1)
        for (size_t k = 0; k < n; ++k)
          if (usable(s.x[k], logx) && usable(s.y[k], logy))
            out += "<circle cx=\"" + num(xs(s.x[k])) + "\" cy=\"" + num(ys(s.y[k])) +
                   "\" r=\"3\" fill=\"" + col + "\"/>";
      out += "</g>";
    }
  }
  if (!c.markers.empty()) {
    out += "<g class=\"markers\" data-series=\"markers\">";
    for (const Marker& m : c.markers) {
      if (!usable(m.x, logx)) continue;
      out += "<line x1=\"" + num(xs(m.x)) + "\" x2=\"" + num(xs(m.x)) + "\" y1=\"" + num(ys.p0) +
             "\" y2=\"" + num(ys.p1) + "\" stroke=\"" + m.color +
             "\" stroke-width=\"1.5\" stroke-dasharray=\"3 3\"><title>" + escape(m.label) +
             "</title></line>";
    }
    out += "</g>";
  }
  return out + "</svg>";
}

std::string render(const BarChart& c) {
  double yhi = 0;
  for (const Series& s : c.series)
    for (double v : s.y) extend(yhi, yhi, v, false);
  const Scale ys = make_scale(0, yhi, false, c.height - kBottom, kTop);
  Scale xs;  // pixels only: categories are evenly spaced
  xs.p0 = kLeft, xs.p1 = c.width - kRight;
  std::string out = open_svg(c.width, c.height, c.title);
  out += legend(c.series, c.width);
  out += axes(xs, ys, "", c.y_label, c.width, c.height, false);
  const size_t ncat = std::max<size_t>(1, c.categories.size());
  const double group_w = (xs.p1 - xs.p0) / ncat;
  const double bar_w = group_w * 0.8 / std::max<size_t>(1, c.series.size());
  for (size_t g = 0; g < c.categories.size(); ++g)
    out += text(xs.p0 + group_w * (g + 0.5), ys.p0 + 15, c.categories[g], "middle");
  for (size_t i = 0; i < c.series.size(); ++i) {
    const Series& s = c.series[i];
    out += group_open(s, "bars");
    for (size_t g = 0; g < c.categories.size() && g < s.y.size(); ++g) {
      if (!std::isfinite(s.y[g])) continue;
      const double x = xs.p0 + group_w * (g + 0.1) + bar_w * i;
      const double top = ys(std::max(0.0, s.y[g]));
      out += "<rect x=\"" + num(x) + "\" y=\"" + num(top) + "\" width=\"" + num(bar_w) +
             "\" height=\"" + num(ys.p0 - top) + "\" fill=\"" + color_of(s, i) + "\"><title>" +
             escape(s.name + " " + c.categories[g] + ": " + format_number(s.y[g])) +
             "</title></rect>";
    }
    out += "</g>";
  }
  return out + "</svg>";
}

}  // namespace crucible::profile::svg
