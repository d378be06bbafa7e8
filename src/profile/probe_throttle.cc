#include "profile/probe_throttle.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/clock.h"
#include "core/threads.h"
#include "profile/cpu_peak.h"
#include "profile/energy.h"

namespace crucible::profile {

nlohmann::json summarize_throttle(const std::vector<std::vector<ThrottleSample>>& per_thread,
                                  double seconds, double threshold) {
  const double window = 0.5;
  const int nwin = std::max(1, int(std::ceil(seconds / window)));
  const size_t T = per_thread.size();
  // Per window: the sum over threads of each thread's mean rate in it, and
  // each thread's mean clock.
  nlohmann::json windows = nlohmann::json::array();
  for (int w = 0; w < nwin; ++w) {
    const double lo = w * window, hi = lo + window;
    double gflops = 0;
    nlohmann::json clocks = nlohmann::json::array();
    for (const auto& samples : per_thread) {
      double g = 0, c = 0;
      int n = 0;
      for (const auto& s : samples)
        if (s.t_s > lo && s.t_s <= hi) g += s.gflops, c += s.clock_ghz, ++n;
      gflops += n ? g / n : 0;
      clocks.push_back(n ? c / n : 0.0);
    }
    windows.push_back({{"t_s", hi}, {"gflops", gflops}, {"clock_ghz", clocks}});
  }
  // First and last second, each thread's mean, summed (rate) or averaged (clock).
  auto span = [&](double lo, double hi, double& gflops, double& clock) {
    gflops = 0, clock = 0;
    bool all = true;
    for (const auto& samples : per_thread) {
      double g = 0, c = 0;
      int n = 0;
      for (const auto& s : samples)
        if (s.t_s > lo && s.t_s <= hi && std::isfinite(s.gflops) && std::isfinite(s.clock_ghz))
          g += s.gflops, c += s.clock_ghz, ++n;
      all &= n > 0;
      gflops += n ? g / n : 0;
      clock += n ? c / n / double(T) : 0;
    }
    return all;
  };
  double fg = 0, fc = 0, lg = 0, lc = 0;
  const double edge = std::min(1.0, seconds / 2);
  bool valid = T > 0 && span(0, edge, fg, fc);
  valid &= T > 0 && span(seconds - edge, seconds + 1e9, lg, lc);
  const double drop = valid && fg > 0 ? 1 - lg / fg : 0;
  const double clock_drop = valid && fc > 0 ? 1 - lc / fc : 0;
  return {{"seconds", seconds},
          {"threads", T},
          {"threshold", threshold},
          {"windows", windows},
          {"first_gflops", valid ? fg : 0.0},
          {"last_gflops", valid ? lg : 0.0},
          {"first_clock_ghz", valid ? fc : 0.0},
          {"last_clock_ghz", valid ? lc : 0.0},
          {"drop", drop},
          {"clock_drop", clock_drop},
          {"throttling", valid && drop > threshold},
          {"valid", valid}};
}

nlohmann::json probe_throttle(const ThrottleOptions& opt) {
  const double seconds = opt.seconds > 0 ? opt.seconds : opt.quick ? 3 : 20;
  const FmaLoop loop = fma_loop();
  if (!loop) return {{"valid", false}, {"error", "no AVX2/AVX-512 FMA on this CPU"}};
  const int T = std::max(1, num_threads());
  std::vector<std::vector<ThrottleSample>> samples(static_cast<size_t>(T));
  // Calibrate on one thread: ~40 ms of FMAs and ~5 ms of adds per sample.
  int64_t fma_iters = 200'000, add_iters = 2'000'000;
  {
    int64_t t0 = now_ns();
    volatile double sink = loop(fma_iters);
    (void)sink;
    fma_iters = int64_t(fma_iters * 0.04 / std::max(1e-6, (now_ns() - t0) * 1e-9));
    t0 = now_ns();
    volatile int64_t s2 = clock_chain(add_iters);
    (void)s2;
    add_iters = int64_t(add_iters * 0.005 / std::max(1e-6, (now_ns() - t0) * 1e-9));
  }
  // The packages' power under this load, from RAPL where the machine exposes
  // it (profile/energy.h): what `plan` prices a step's energy with.
  auto meter = EnergyMeter::for_device(Device::cpu());
  auto read_j = [&]() -> double {
    if (!meter) return -1;
    auto j = meter->joules();
    return j ? *j : -1;
  };
  const double j0 = read_j();
  const int64_t start = now_ns();
  const int64_t end = start + int64_t(seconds * 1e9);
#pragma omp parallel num_threads(T)
  {
    auto& mine = samples[size_t(omp_get_thread_num())];
    volatile double sink = 0;
    // Each sample is timed on the thread's own CPU clock: another process
    // taking turns on the core slows the wall clock, not the core, and read
    // as throttling (-34% beside a parallel build).
    for (;;) {
      if (now_ns() >= end) break;
      const int64_t t0 = thread_cpu_ns();
      sink = sink + loop(fma_iters);
      const int64_t t1 = thread_cpu_ns();
      sink = sink + double(clock_chain(add_iters));
      const int64_t t2 = thread_cpu_ns();
      mine.push_back({(now_ns() - start) * 1e-9,
                      fma_loop_flops(fma_iters) / (std::max<int64_t>(t1 - t0, 1) * 1e-9) * 1e-9,
                      double(kClockChainCycles) * double(add_iters) / (std::max<int64_t>(t2 - t1, 1) * 1e-9) * 1e-9});
    }
  }
  nlohmann::json out = summarize_throttle(samples, seconds, opt.threshold);
  const double j1 = j0 >= 0 ? read_j() : -1;
  if (j1 >= j0 && j0 >= 0) {
    out["power_w"] = j1 / ((now_ns() - start) * 1e-9);
    out["power_source"] = meter->source();
  } else {
    out["power_unmeasured"] =
        meter ? std::string("[energy] the counter could not be read") : meter.status().message();
  }
  return out;
}

std::string throttle_table(const nlohmann::json& j) {
  if (!j.value("valid", false)) return "  throttle: not measured (" + j.value("error", "no samples") + ")\n";
  char line[256];
  std::snprintf(line, sizeof line,
                "  %.0f s flat out on %d threads: first second %.1f GFLOP/s at %.2f GHz, last "
                "second %.1f GFLOP/s at %.2f GHz: %+.1f%%%s\n",
                j["seconds"].get<double>(), j["threads"].get<int>(), j["first_gflops"].get<double>(),
                j["first_clock_ghz"].get<double>(), j["last_gflops"].get<double>(),
                j["last_clock_ghz"].get<double>(), -100 * j["drop"].get<double>(),
                j["throttling"].get<bool>() ? "  THROTTLING (more than the threshold)" : "");
  std::string out = line;
  if (j.contains("power_w"))
    out += "  package power under that load: " +
           std::to_string(int(j["power_w"].get<double>() + 0.5)) + " W (" +
           j.value("power_source", "?") + ")\n";
  else if (j.contains("power_unmeasured"))
    out += "  package power: " + j["power_unmeasured"].get<std::string>() + "\n";
  return out;
}

}  // namespace crucible::profile
