#include "plan/calibrate.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace crucible::plan {

namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void scale_compute(Device& d, double k) {
  for (int p = 0; p < 2; ++p) {
    for (Device::GemmPoint& g : d.gemm_efficiency[p]) g.efficiency = std::clamp(g.efficiency * k, 1e-4, 1.0);
    d.attention_efficiency[p] = std::clamp(d.attention_efficiency[p] * k, 1e-4, 1.0);
  }
}

std::vector<Prediction> predict_all(const Cluster& c, const std::vector<Observation>& runs) {
  std::vector<Prediction> out;
  for (const Observation& o : runs) out.push_back(predict(o.model, o.layout, c));
  return out;
}

}  // namespace

Result<Calibration> calibrate(const Cluster& start, const std::vector<Observation>& runs) {
  if (runs.empty()) return Status::invalid("[plan] --calibrate: no runs");
  const std::vector<Prediction> before = predict_all(start, runs);
  for (size_t i = 0; i < runs.size(); ++i) {
    if (!before[i].divides)
      return Status::invalid("[plan] --calibrate: " + runs[i].run + ": its layout does not run on " + start.name + ": " +
                             before[i].why_not);
    if (runs[i].measured.steps == 0 || runs[i].measured.step <= 0)
      return Status::invalid("[plan] --calibrate: " + runs[i].run + " has no measured steps (metrics.jsonl)");
  }
  Cluster c = start;
  for (int iter = 0; iter < 6; ++iter) {
    const std::vector<Prediction> now = predict_all(c, runs);
    double pc = 0, mc = 0, po = 0, mo = 0, pd = 0, md = 0, residual = 0, wait = 0, zero_grads = 0;
    for (size_t i = 0; i < runs.size(); ++i) {
      const Measured& m = runs[i].measured;
      const Breakdown& b = now[i].breakdown;
      pc += b.forward + b.backward, mc += std::max(0.0, m.forward + m.backward - m.tp_comm);
      po += b.optimizer, mo += m.optimizer;
      if (b.dp_comm > 0 && m.dp_comm > 0) pd += b.dp_comm, md += m.dp_comm;
      residual += std::max(0.0, m.step - (m.data_wait + m.forward + m.backward + m.optimizer + m.dp_comm +
                                          m.pipeline_wait));
      wait += m.data_wait;
      zero_grads += b.other - c.step_overhead_s;
    }
    const double n = double(runs.size());
    if (pc > 0 && mc > 0) scale_compute(c.device, pc / mc);
    if (po > 0 && mo > 0) c.device.memory_efficiency = std::clamp(c.device.memory_efficiency * po / mo, 1e-3, 1.0);
    if (pd > 0 && md > 0)
      for (AlphaBeta& ab : c.intra.kinds) ab.bandwidth_Bps *= pd / md;
    c.step_overhead_s = std::max(0.0, (residual - zero_grads) / n);
    c.data_wait_s = wait / n;
  }
  const std::vector<Prediction> after = predict_all(c, runs);
  Calibration out;
  out.cluster = c;
  std::vector<double> eb, ea;
  char line[512];
  std::string& r = out.report;
  r += "run                                       measured   before (error)      after (error)\n";
  for (size_t i = 0; i < runs.size(); ++i) {
    const double m = runs[i].measured.step;
    const double b = before[i].step_time_s, a = after[i].step_time_s;
    eb.push_back(std::fabs(b / m - 1)), ea.push_back(std::fabs(a / m - 1));
    std::snprintf(line, sizeof line, "%-40s %8.1f ms %8.1f ms (%+5.1f%%) %8.1f ms (%+5.1f%%)\n",
                  runs[i].run.substr(std::max<size_t>(0, runs[i].run.size() > 40 ? runs[i].run.size() - 40 : 0)).c_str(),
                  m * 1e3, b * 1e3, 100 * (b / m - 1), a * 1e3, 100 * (a / m - 1));
    r += line;
  }
  out.median_error_before = median(eb);
  out.median_error_after = median(ea);
  std::snprintf(line, sizeof line,
                "median |error| of the step time: %.1f%% before, %.1f%% after (%zu run%s)\n"
                "fitted: GEMM efficiency x%.3f, attention %.3f / %.3f (fp32 / bf16), memory efficiency %.3f, "
                "intra-node bandwidth x%.3f, step overhead %.2f ms, data wait %.2f ms\n",
                100 * out.median_error_before, 100 * out.median_error_after, runs.size(), runs.size() == 1 ? "" : "s",
                c.device.gemm_efficiency[0].empty() || start.device.gemm_efficiency[0].empty()
                    ? 1.0
                    : c.device.gemm_efficiency[0].back().efficiency / start.device.gemm_efficiency[0].back().efficiency,
                c.device.attention_efficiency[0], c.device.attention_efficiency[1], c.device.memory_efficiency,
                c.intra.kinds[0].bandwidth_Bps / start.intra.kinds[0].bandwidth_Bps, c.step_overhead_s * 1e3,
                c.data_wait_s * 1e3);
  r += line;
  return out;
}

}  // namespace crucible::plan
