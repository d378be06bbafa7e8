#include "sim/risk/risk_output.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/file_io.h"
#include "sim/risk/pricing.h"

namespace crucible::sim::risk {


namespace {
double delta_normal_var(const ScenarioEngine& e, double level) {
  return e.delta_normal_mean() + norm_inv(level) * e.delta_normal_sigma();
}
}  // namespace

nlohmann::json risk_summary(const RiskConfig& c, const ScenarioEngine& engine,
                            const std::vector<TailEstimate>& est, const TailProbability& tail,
                            int64_t is_hits, const std::vector<double>& loss) {
  nlohmann::json j = nlohmann::json::object();
  const Portfolio& book = engine.portfolio();
  j["portfolio_value"] = engine.value_today();
  j["instruments"] = int64_t(book.instruments().size());
  for (Kind k : {Kind::kEquity, Kind::kEuropeanCall, Kind::kEuropeanPut, Kind::kAsianCall,
                 Kind::kAsianPut, Kind::kZeroBond})
    if (int n = book.count(k)) j[std::string("n_") + kind_name(k)] = n;
  j["factors"] = engine.model().factors();
  j["copula"] = c.copula == "student" ? "student-t(" + std::to_string(c.dof) + ")" : c.copula;
  j["returns"] = c.returns;
  j["horizon_days"] = c.horizon_days;
  j["scenarios"] = int64_t(loss.size());
  double sum = 0, sum_sq = 0;  // scenario order
  for (double l : loss) sum += l;
  const double mean = loss.empty() ? 0.0 : sum / double(loss.size());
  for (double l : loss) sum_sq += (l - mean) * (l - mean);
  j["loss_mean"] = mean;
  j["loss_sd"] = loss.size() > 1 ? std::sqrt(sum_sq / double(loss.size() - 1)) : 0.0;
  j["delta_normal_sigma"] = engine.delta_normal_sigma();
  for (const TailEstimate& e : est) {
    const std::string t = level_tag(e.level);
    j["var_" + t] = e.var;
    j["var_" + t + "_ci95"] = {e.var_lo, e.var_hi};
    j["var_" + t + "_se"] = e.var_se;
    j["es_" + t] = e.es;
    j["es_" + t + "_se"] = e.es_se;
    j["delta_normal_var_" + t] = delta_normal_var(engine, e.level);
  }
  if (engine.has_tail()) {
    int64_t crude_hits = 0;
    for (double l : loss) crude_hits += l > engine.threshold();
    j["tail_sigmas"] = c.tail_sigmas;
    j["tail_threshold"] = engine.threshold();
    j["tail_p_is"] = tail.p;
    j["tail_p_is_se"] = tail.se;
    j["tail_is_hits"] = is_hits;
    j["tail_p_crude"] = loss.empty() ? 0.0 : double(crude_hits) / double(loss.size());
    j["tail_crude_hits"] = crude_hits;
    j["tail_vrf"] = tail.vrf;
    j["tail_shift_norm"] = engine.shift_norm();
    if (c.copula == "student") j["tail_mixing_scale"] = engine.mixing_scale();
    j["tail_p_delta_normal"] =
        norm_cdf(-(engine.threshold() - engine.delta_normal_mean()) / engine.delta_normal_sigma());
  }
  return j;
}

Status write_risk_files(const std::string& run_dir, const ScenarioEngine& engine,
                        const std::vector<TailEstimate>& est, const std::vector<double>& loss) {
  std::string csv = "level,var,var_lo95,var_hi95,var_se,es,es_se,delta_normal_var\n";
  char buf[256];
  for (const TailEstimate& e : est) {
    std::snprintf(buf, sizeof buf, "%.6g,%.17g,%.17g,%.17g,%.17g,%.17g,%.17g,%.17g\n", e.level,
                  e.var, e.var_lo, e.var_hi, e.var_se, e.es, e.es_se,
                  delta_normal_var(engine, e.level));
    csv += buf;
  }
  CRUCIBLE_RETURN_IF_ERROR(write_file_atomic(run_dir + "/risk_var.csv", csv));
  std::string hist = "loss_lo,loss_hi,count\n";
  if (!loss.empty()) {
    const auto [mn, mx] = std::minmax_element(loss.begin(), loss.end());
    constexpr int kBins = 100;
    const double lo = *mn, width = (*mx - *mn) / kBins;
    std::vector<int64_t> count(kBins, 0);
    for (double l : loss) count[width > 0 ? std::min(kBins - 1, int((l - lo) / width)) : 0]++;
    for (int b = 0; b < kBins; ++b) {
      std::snprintf(buf, sizeof buf, "%.10g,%.10g,%lld\n", lo + b * width, lo + (b + 1) * width,
                    (long long)count[b]);
      hist += buf;
    }
  }
  return write_file_atomic(run_dir + "/risk_loss_histogram.csv", hist);
}

}  // namespace crucible::sim::risk
