#include "profile/scaling.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/file_io.h"
#include "core/stats.h"
#include "profile/run_schema.h"

namespace crucible::profile {

namespace fs = std::filesystem;

double AmdahlFit::predict(double p) const {
  return 1.0 / (serial_fraction + (1 - serial_fraction) / p);
}

AmdahlFit fit_amdahl(const std::vector<SpeedupPoint>& points) {
  AmdahlFit f;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  f.serial_fraction = f.intercept = f.slope = f.rms_residual = nan;
  const size_t n = points.size();
  if (n < 2) return f;
  double mx = 0, my = 0;
  for (const auto& p : points) mx += 1 / p.n, my += 1 / p.speedup;
  mx /= n, my /= n;
  double sxx = 0, sxy = 0;
  for (const auto& p : points) {
    sxx += (1 / p.n - mx) * (1 / p.n - mx);
    sxy += (1 / p.n - mx) * (1 / p.speedup - my);
  }
  if (!(sxx > 0)) return f;
  f.slope = sxy / sxx;
  f.intercept = my - f.slope * mx;
  f.serial_fraction = std::clamp(f.intercept / (f.intercept + f.slope), 0.0, 1.0);
  double ss = 0;
  for (const auto& p : points) {
    double r = 1 / p.speedup - (f.intercept + f.slope / p.n);
    ss += r * r;
  }
  f.rms_residual = std::sqrt(ss / n);
  return f;
}

double karp_flatt(double p, double speedup) {
  if (p <= 1) return std::numeric_limits<double>::quiet_NaN();
  return (1 / speedup - 1 / p) / (1 - 1 / p);
}

Result<ScalingResult> analyze_scaling(std::vector<std::pair<int, double>> pts) {
  if (pts.empty()) return Status::invalid("[bench] scaling: no measurements");
  std::sort(pts.begin(), pts.end());
  for (size_t i = 0; i < pts.size(); ++i) {
    if (pts[i].first < 1)
      return Status::invalid("[bench] scaling: world size " + std::to_string(pts[i].first) +
                             " is not positive");
    if (i > 0 && pts[i].first == pts[i - 1].first)
      return Status::invalid("[bench] scaling: world size " + std::to_string(pts[i].first) +
                             " measured twice");
    if (!(pts[i].second > 0))
      return Status::invalid("[bench] scaling: " + std::to_string(pts[i].first) +
                             " ranks: throughput is not positive");
  }
  ScalingResult r;
  const double n0 = pts[0].first, t0 = pts[0].second;
  std::vector<SpeedupPoint> sp;
  for (const auto& [n, tps] : pts) {
    ScalingPoint p;
    p.ranks = n;
    p.tokens_per_s = tps;
    p.speedup = tps / t0;
    const double units = n / n0;
    p.efficiency = p.speedup / units;
    p.karp_flatt = karp_flatt(units, p.speedup);
    r.points.push_back(p);
    sp.push_back({units, p.speedup});
  }
  r.fit = fit_amdahl(sp);
  return r;
}

Result<RunThroughput> read_scaling_run(const std::string& run_dir, int ranks, int skip_steps) {
  const std::string path = run_dir + "/metrics.jsonl";
  std::ifstream in(path);
  if (!in) return Status::not_found("[bench] scaling: no " + path);
  // A `crucible sim` run (RUN/sim.json) counts steps per second (its rows'
  // step_ms), a training run tokens per second.
  std::error_code sim_ec;
  const bool sim = fs::exists(run_dir + "/sim.json", sim_ec);
  std::vector<double> tps;
  int line_no = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    // A torn last line (a run killed mid-write) is skipped, as MetricsWriter does.
    if (j.is_discarded() || !j.is_object()) continue;
    if (++line_no <= skip_steps) continue;
    if (sim) {
      auto ms = j.find("step_ms");
      if (ms == j.end() || !ms->is_number() || !(ms->get<double>() > 0))
        return Status::corrupt("[bench] scaling: " + path + " line " + std::to_string(line_no) + ": no step_ms > 0");
      tps.push_back(1e3 / ms->get<double>());
      continue;
    }
    CRUCIBLE_RETURN_IF_ERROR(
        check_metrics_row(j, "[bench] scaling:", path + " line " + std::to_string(line_no)));
    auto it = j.find("tokens_per_s");
    if (it == j.end() || !it->is_number())
      return Status::corrupt("[bench] scaling: " + path + " line " + std::to_string(line_no) +
                             ": no tokens_per_s");
    tps.push_back(it->get<double>());
  }
  if (tps.empty())
    return Status::invalid("[bench] scaling: " + path + " has no step after skipping the first " +
                           std::to_string(skip_steps));
  RunThroughput t;
  t.tokens_per_s = median(tps);
  t.steps_used = int(tps.size());
  if (ranks > 0) {
    t.ranks = ranks;
  } else if (sim) {  // results.json records the ranks of a finished simulation
    std::ifstream r(run_dir + "/results.json");
    auto j = nlohmann::json::parse(r, nullptr, false);
    t.ranks = j.is_object() ? std::max(1, j.value("ranks", 1)) : 1;
  } else {
    int files = 0;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(run_dir, ec)) {
      const std::string name = e.path().filename().string();
      if (name.rfind("metrics.rank", 0) == 0 && name.size() > 6 &&
          name.compare(name.size() - 6, 6, ".jsonl") == 0)
        ++files;
    }
    t.ranks = std::max(1, files);
  }
  return t;
}

Result<ScalingResult> scaling_from_runs(const std::vector<std::string>& dirs,
                                        const std::vector<int>& ranks, int skip_steps) {
  if (!ranks.empty() && ranks.size() != dirs.size())
    return Status::invalid("[bench] scaling: " + std::to_string(dirs.size()) +
                           " run directories but " + std::to_string(ranks.size()) +
                           " world sizes in --ranks");
  std::vector<std::pair<int, double>> pts;
  for (size_t i = 0; i < dirs.size(); ++i) {
    auto t = read_scaling_run(dirs[i], ranks.empty() ? 0 : ranks[i], skip_steps);
    if (!t) return t.status();
    pts.push_back({t->ranks, t->tokens_per_s});
  }
  return analyze_scaling(std::move(pts));
}

Status write_scaling_json(const std::string& path, const ScalingResult& r) {
  return write_file_atomic(path, scaling_to_json(r).dump(2) + "\n");
}

nlohmann::json scaling_to_json(const ScalingResult& r) {
  auto num = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); };
  nlohmann::json points = nlohmann::json::array(), ideal = nlohmann::json::array();
  const double n0 = r.points.empty() ? 1 : r.points[0].ranks;
  const double t0 = r.points.empty() ? 0 : r.points[0].tokens_per_s;
  for (const auto& p : r.points) {
    points.push_back({{"ranks", p.ranks},
                      {"tokens_per_s", p.tokens_per_s},
                      {"speedup", p.speedup},
                      {"efficiency", p.efficiency},
                      {"karp_flatt", num(p.karp_flatt)}});
    ideal.push_back(
        {{"ranks", p.ranks}, {"speedup", p.ranks / n0}, {"tokens_per_s", t0 * p.ranks / n0}});
  }
  return {{"points", points}, {"serial_fraction", num(r.fit.serial_fraction)}, {"ideal", ideal}};
}

std::string scaling_table(const ScalingResult& r) {
  std::string out;
  char buf[160];
  std::snprintf(buf, sizeof buf, "%6s %12s %8s %8s %10s %11s\n", "ranks", "per second", "speedup",
                "ideal", "efficiency", "Karp-Flatt");
  out += buf;
  const double n0 = r.points.empty() ? 1 : r.points[0].ranks;
  for (const auto& p : r.points) {
    char kf[16] = "-";
    if (std::isfinite(p.karp_flatt)) std::snprintf(kf, sizeof kf, "%.3f", p.karp_flatt);
    std::snprintf(buf, sizeof buf, "%6d %12.1f %7.2fx %7.2fx %9.1f%% %11s\n", p.ranks,
                  p.tokens_per_s, p.speedup, p.ranks / n0, 100 * p.efficiency, kf);
    out += buf;
  }
  if (std::isfinite(r.fit.serial_fraction)) {
    std::snprintf(buf, sizeof buf,
                  "Amdahl fit: serial fraction %.3f (max speedup %.1fx; rms residual of 1/S "
                  "%.3g)\n",
                  r.fit.serial_fraction,
                  r.fit.serial_fraction > 0 ? 1 / r.fit.serial_fraction : INFINITY,
                  r.fit.rms_residual);
    out += buf;
  } else {
    out += "Amdahl fit: needs at least two world sizes\n";
  }
  return out;
}

}  // namespace crucible::profile
