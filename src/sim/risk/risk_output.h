// What a risk run hands back: the summary JSON (RUN/results.json, shown by
// the report) and the workload's own files in the run directory, written
// atomically by rank 0:
//   risk_var.csv             level, VaR, its 95% interval and SE, ES and SE,
//                            the delta-normal VaR beside it
//   risk_loss_histogram.csv  100 equal bins from the smallest to the largest loss
// Thread-safety: pure functions of their arguments.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"
#include "sim/risk/estimators.h"
#include "sim/risk/risk_config.h"
#include "sim/risk/scenario_engine.h"

namespace crucible::sim::risk {


nlohmann::json risk_summary(const RiskConfig& c, const ScenarioEngine& engine,
                            const std::vector<TailEstimate>& est, const TailProbability& tail,
                            int64_t is_hits, const std::vector<double>& loss);

Status write_risk_files(const std::string& run_dir, const ScenarioEngine& engine,
                        const std::vector<TailEstimate>& est, const std::vector<double>& loss);

}  // namespace crucible::sim::risk
