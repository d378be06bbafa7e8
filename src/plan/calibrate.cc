#include "plan/calibrate.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <tuple>

#include "core/stats.h"

namespace crucible::plan {

namespace {

// Each run's GEMM shapes (forward and both backward ones) take the
// efficiency that makes its predicted compute its measured compute: points
// at those shapes are set (added where the table has none) to the
// efficiency interpolated there now x the run's ratio, averaged where runs
// share a shape. A run then predicts itself, and a layout between runs
// takes after the nearest ones (the table's interpolation).
void refit_gemms(Device& d, const std::vector<Observation>& runs, const std::vector<double>& ratio) {
  std::vector<Device::GemmPoint> add[2];
  std::vector<int> count[2];
  for (size_t i = 0; i < runs.size(); ++i) {
    if (!(ratio[i] > 0)) continue;
    const int p = precision_index(runs[i].layout.precision);
    for (const GemmShape& g : forward_gemms(runs[i].model, runs[i].layout))
      for (const auto& [m, n, k] : {std::tuple{g.m, g.n, g.k}, std::tuple{g.m, g.k, g.n}, std::tuple{g.k, g.n, g.m}}) {
        const double eff = std::clamp(d.gemm_efficiency_at(p, m, n, k) * ratio[i], 1e-4, 1.0);
        size_t j = 0;
        while (j < add[p].size() && !(add[p][j].m == m && add[p][j].n == n && add[p][j].k == k)) ++j;
        if (j == add[p].size()) add[p].push_back({m, n, k, 0}), count[p].push_back(0);
        add[p][j].efficiency += eff, ++count[p][j];
      }
  }
  for (int p = 0; p < 2; ++p)
    for (size_t j = 0; j < add[p].size(); ++j) {
      Device::GemmPoint g = add[p][j];
      g.efficiency /= count[p][j];
      auto& table = d.gemm_efficiency[p];
      auto it = std::find_if(table.begin(), table.end(),
                             [&](const Device::GemmPoint& q) { return q.m == g.m && q.n == g.n && q.k == g.k; });
      if (it == table.end()) table.push_back(g);
      else *it = g;
    }
}

// Each run as it ran: replayed from CUDA graphs or launched kernel by kernel.
std::vector<Prediction> predict_all(const Cluster& c, const std::vector<Observation>& runs) {
  std::vector<Prediction> out;
  Cluster as_run = c;
  for (const Observation& o : runs) {
    as_run.stack.graphs = o.measured.graph > 0;
    out.push_back(predict(o.model, o.layout, as_run));
  }
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
    double po = 0, mo = 0, residual = 0, wait = 0;
    std::vector<double> ratio(runs.size(), 0);
    for (size_t i = 0; i < runs.size(); ++i) {
      const Measured& m = runs[i].measured;
      const Breakdown& b = now[i].breakdown;
      if (m.graph > 0) {  // one device time: compute and optimizer scale alike
        ratio[i] = (b.forward + b.backward + b.optimizer) / m.graph;
        po += b.optimizer, mo += b.optimizer / ratio[i];
      } else {
        const double mc = std::max(0.0, m.forward + m.backward - m.tp_comm);
        if (mc > 0) ratio[i] = (b.forward + b.backward) / mc;
        po += b.optimizer, mo += m.optimizer;
      }
      wait += m.data_wait;
      // What the step measured beyond everything predicted but the overhead.
      residual += m.step - (now[i].step_time_s - c.step_overhead_s - c.data_wait_s) - m.data_wait;
    }
    const double n = double(runs.size());
    refit_gemms(c.device, runs, ratio);
    if (po > 0 && mo > 0) c.device.memory_efficiency = std::clamp(c.device.memory_efficiency * po / mo, 1e-3, 2.0);
    c.step_overhead_s = std::max(0.0, residual / n);
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
                "fitted: GEMM table %zu / %zu points (fp32 / bf16), attention %.3f / %.3f, memory efficiency %.3f, "
                "step overhead %.2f ms, data wait %.2f ms\n",
                100 * out.median_error_before, 100 * out.median_error_after, runs.size(), runs.size() == 1 ? "" : "s",
                c.device.gemm_efficiency[0].size(), c.device.gemm_efficiency[1].size(),
                c.device.attention_efficiency[0], c.device.attention_efficiency[1], c.device.memory_efficiency,
                c.step_overhead_s * 1e3,
                c.data_wait_s * 1e3);
  r += line;
  return out;
}

}  // namespace crucible::plan
