#include "profile/analysis.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <limits>

#include "core/stats.h"

namespace crucible::profile {

namespace {

// Least-squares slope of y against its index.
double ls_slope(const std::vector<double>& y) {
  const size_t n = y.size();
  if (n < 2) return 0;
  double mx = (n - 1) / 2.0, my = 0;
  for (double v : y) my += v;
  my /= n;
  double sxy = 0, sxx = 0;
  for (size_t i = 0; i < n; ++i) {
    sxy += (i - mx) * (y[i] - my);
    sxx += (i - mx) * (i - mx);
  }
  return sxy / sxx;
}

std::string human_bytes(double b) {
  const char* unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  double a = std::fabs(b);
  while (a >= 1024 && u < 4) a /= 1024, b /= 1024, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %s", b, unit[u]);
  return buf;
}

}  // namespace

double mfu(double flops_per_token, double tokens_per_s, double peak_flops) {
  if (peak_flops <= 0) return 0;
  return flops_per_token * tokens_per_s / peak_flops;
}

double mfu(const nn::GPTConfig& model, int T, double tokens_per_s, double peak_flops) {
  return mfu(model.flops_per_token(T), tokens_per_s, peak_flops);
}

LeakVerdict detect_leak(const std::vector<double>& in_use, const LeakOptions& opt) {
  LeakVerdict v;
  const int window = std::max(1, opt.window);
  const int first = std::max(0, opt.warmup_steps);
  // floor[i]: min over steps first+i .. first+i+window-1 (windows start after warm-up).
  std::vector<double> floor;
  for (int i = first; i + window <= int(in_use.size()); ++i)
    floor.push_back(*std::min_element(in_use.begin() + i, in_use.begin() + i + window));
  if (floor.size() < 8) {
    v.message = "[profile] leak check: " + std::to_string(in_use.size()) +
                " steps are too few (need warm-up " + std::to_string(first) + " + window " +
                std::to_string(window) + " + 8)";
    return v;
  }
  const double ls = ls_slope(floor);
  v.floor_start = floor.front();
  v.floor_end = floor.back();
  const double growth = v.floor_end - v.floor_start;
  const bool slope_ok = ls > opt.min_slope_bytes_per_step;
  const bool growth_ok = growth > opt.min_growth_bytes &&
                         growth > opt.min_growth_fraction * std::max(0.0, v.floor_start);
  // Steadiness: the median over i of the floor's rise from step i to step
  // i + L, L = a quarter of the measured steps. A one-time step-up lies
  // between i and i + L for at most a third of the pairs, so it cannot move
  // the median; a leak raises every pair, also on top of a step-up.
  const size_t lag = floor.size() / 4;
  std::vector<double> rises;
  for (size_t i = 0; i + lag < floor.size(); ++i)
    rises.push_back((floor[i + lag] - floor[i]) / double(lag));
  const double steady_slope = median(rises);
  const bool steady = steady_slope > opt.min_slope_bytes_per_step;
  v.leaking = slope_ok && growth_ok && steady;
  v.bytes_per_step = steady_slope;
  const std::string summary = "in-use floor " + human_bytes(v.floor_start) + " -> " +
                              human_bytes(v.floor_end) + " over " + std::to_string(floor.size()) +
                              " steps, " + human_bytes(v.bytes_per_step) + "/step";
  if (v.leaking)
    v.message = "[profile] memory leak: " + summary + ", steady through the run";
  else if (slope_ok && growth_ok)
    v.message = "[profile] no leak: " + summary + " but not steadily (least squares " +
                human_bytes(ls) + "/step: a one-time allocation)";
  else
    v.message = "[profile] no leak: " + summary;
  return v;
}

std::vector<SiteLeak> detect_leaks_by_site(
    const std::map<std::string, std::vector<double>>& in_use_bytes_per_site,
    const LeakOptions& opt) {
  std::vector<SiteLeak> out;
  for (const auto& [site, series] : in_use_bytes_per_site) {
    LeakVerdict v = detect_leak(series, opt);
    if (v.leaking) {
      v.message =
          "[profile] site " + site + ": " + v.message.substr(std::string("[profile] ").size());
      out.push_back({site, std::move(v)});
    }
  }
  std::sort(out.begin(), out.end(), [](const SiteLeak& a, const SiteLeak& b) {
    return a.verdict.bytes_per_step > b.verdict.bytes_per_step;
  });
  return out;
}

StragglerReport detect_stragglers(const std::vector<std::vector<PhaseTimes>>& per_rank,
                                  double threshold, double min_excess_ms) {
  StragglerReport rep;
  const char* names[] = {"data_wait", "forward", "backward", "optimizer", "other"};
  constexpr int kPhases = 5;
  const int R = int(per_rank.size());
  std::vector<double> compute(R);
  std::vector<std::array<double, kPhases>> phase(R);
  for (int r = 0; r < R; ++r) {
    std::vector<double> c;
    std::array<std::vector<double>, kPhases> ph;
    for (const PhaseTimes& s : per_rank[r]) {
      c.push_back(s.step_ms - s.comm_ms);
      ph[0].push_back(s.data_wait_ms);
      ph[1].push_back(s.forward_ms);
      ph[2].push_back(s.backward_ms);
      ph[3].push_back(s.optimizer_ms);
      ph[4].push_back(s.step_ms - s.comm_ms - s.data_wait_ms - s.forward_ms - s.backward_ms -
                      s.optimizer_ms);
    }
    compute[r] = median(c);
    for (int p = 0; p < kPhases; ++p) phase[r][p] = median(ph[p]);
  }
  rep.median_compute_ms = median(compute);
  std::array<double, kPhases> phase_median{};
  for (int p = 0; p < kPhases; ++p) {
    std::vector<double> v;
    for (int r = 0; r < R; ++r) v.push_back(phase[r][p]);
    phase_median[p] = median(v);
  }
  for (int r = 0; r < R && rep.median_compute_ms > 0; ++r) {
    double excess = compute[r] / rep.median_compute_ms - 1;
    if (!(excess > threshold) || compute[r] - rep.median_compute_ms <= min_excess_ms) continue;
    Straggler s;
    s.rank = r;
    s.compute_ms = compute[r];
    s.excess = excess;
    int best = 0;
    for (int p = 1; p < kPhases; ++p)
      if (phase[r][p] - phase_median[p] > phase[r][best] - phase_median[best]) best = p;
    s.phase = names[best];
    s.phase_excess_ms = phase[r][best] - phase_median[best];
    rep.stragglers.push_back(s);
  }
  std::sort(rep.stragglers.begin(), rep.stragglers.end(),
            [](const Straggler& a, const Straggler& b) { return a.excess > b.excess; });
  if (rep.stragglers.empty()) {
    char buf[128];
    std::snprintf(buf, sizeof buf, "[profile] %d ranks balanced (compute %.1f ms median)", R,
                  rep.median_compute_ms);
    rep.message = buf;
  }
  for (const Straggler& s : rep.stragglers) {
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "[profile] straggler: rank %d computes %.1f ms per step, %.0f%% above the "
                  "median %.1f ms; most of it in %s (+%.1f ms)\n",
                  s.rank, s.compute_ms, 100 * s.excess, rep.median_compute_ms, s.phase.c_str(),
                  s.phase_excess_ms);
    rep.message += buf;
  }
  if (!rep.message.empty() && rep.message.back() == '\n') rep.message.pop_back();
  return rep;
}

double expected_comm_bytes_per_step(int64_t params, int world, int zero_stage, int dtype_bytes) {
  if (world <= 1) return 0;
  const double n = world, buffer = double(params) * dtype_bytes, pass = (n - 1) / n * buffer;
  switch (zero_stage) {
    case 0:
      return 2 * pass;  // allreduce = reduce-scatter + all-gather
    case 1:
      return 3 * pass;  // allreduce + parameter all-gather
    default:
      return 2 * pass;  // reduce-scatter + parameter all-gather
  }
}

CommVolumeCheck check_comm_volume(double measured, double expected) {
  CommVolumeCheck c;
  char buf[256];
  if (expected <= 0) {
    c.ok = measured <= 0;
    if (!c.ok) {
      std::snprintf(buf, sizeof buf,
                    "[profile] communication: %s per step measured where none is expected",
                    human_bytes(measured).c_str());
      c.warning = buf;
    }
    return c;
  }
  c.ratio = measured / expected;
  c.ok = c.ratio >= 0.5 && c.ratio <= 1.5;
  if (!c.ok) {
    std::snprintf(
        buf, sizeof buf, "[profile] communication: %s per step is %.0f%% of the expected %s — %s",
        human_bytes(measured).c_str(), 100 * c.ratio, human_bytes(expected).c_str(),
        c.ratio < 0.5 ? "not actually distributing?" : "more traffic than the layout needs");
    c.warning = buf;
  }
  return c;
}

}  // namespace crucible::profile
