#include "sim/risk/risk_config.h"

#include <cmath>
#include <cstdio>
#include <string>

namespace crucible::sim::risk {

std::vector<config::Field> risk_fields(RiskConfig& c) {
  return {
      {"risk.scenarios", &c.scenarios},
      {"risk.batch", &c.batch},
      {"risk.horizon_days", &c.horizon_days},
      {"risk.var_levels", &c.var_levels},
      {"risk.copula", &c.copula},
      {"risk.dof", &c.dof},
      {"risk.returns", &c.returns},
      {"risk.tail_sigmas", &c.tail_sigmas},
      {"risk.portfolio", &c.portfolio},
      {"risk.instruments", &c.instruments},
      {"risk.market.names", &c.names},
      {"risk.market.spots", &c.spots},
      {"risk.market.vols", &c.vols},
      {"risk.market.drifts", &c.drifts},
      {"risk.market.rate", &c.rate},
      {"risk.market.rate_vol", &c.rate_vol},
      {"risk.market.correlation", &c.correlation},
  };
}

namespace {
Status bad(const std::string& key, const std::string& why) {
  return Status::invalid("[config] " + key + ": " + why);
}
std::string num(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}
}  // namespace

Status validate_risk(const RiskConfig& c) {
  if (c.scenarios < 1)
    return bad("risk.scenarios", "must be >= 1, got " + std::to_string(c.scenarios));
  if (c.batch < 1) return bad("risk.batch", "must be >= 1, got " + std::to_string(c.batch));
  if (c.batch > c.scenarios)
    return bad("risk.batch", std::to_string(c.batch) + " exceeds risk.scenarios (" +
                                 std::to_string(c.scenarios) + ")");
  if (!(c.horizon_days > 0) || !std::isfinite(c.horizon_days))
    return bad("risk.horizon_days", "must be > 0, got " + num(c.horizon_days));
  if (c.var_levels.empty()) return bad("risk.var_levels", "needs at least one level");
  for (double a : c.var_levels)
    if (!(a > 0 && a < 1))
      return bad("risk.var_levels", "each level must lie in (0, 1), got " + num(a));
  if (c.copula != "gaussian" && c.copula != "student")
    return bad("risk.copula", "must be \"gaussian\" or \"student\", got \"" + c.copula + "\"");
  if (c.dof < 1 || c.dof > 200)
    return bad("risk.dof", "must be in [1, 200], got " + std::to_string(c.dof));
  if (c.returns != "log" && c.returns != "simple")
    return bad("risk.returns", "must be \"log\" or \"simple\", got \"" + c.returns + "\"");
  if (!(c.tail_sigmas >= 0) || c.tail_sigmas > 8)
    return bad("risk.tail_sigmas", "must be in [0, 8] (0: off), got " + num(c.tail_sigmas));
  const size_t n = c.names.size();
  if (n == 0 || n > size_t(kMaxEquities))
    return bad("risk.market.names", "needs 1 to " + std::to_string(kMaxEquities) +
                                        " equity factors, got " + std::to_string(n));
  for (size_t i = 0; i < n; ++i) {
    if (c.names[i].empty() || c.names[i].find_first_of(", \t") != std::string::npos)
      return bad("risk.market.names", "name " + std::to_string(i) + " \"" + c.names[i] +
                                          "\" is empty or holds a comma/space");
    for (size_t j = 0; j < i; ++j)
      if (c.names[j] == c.names[i])
        return bad("risk.market.names", "\"" + c.names[i] + "\" appears twice");
  }
  auto per_name = [&](const char* key, const config::DoubleList& v, bool positive) -> Status {
    if (v.size() != n)
      return bad(key,
                 "has " + std::to_string(v.size()) + " values for " + std::to_string(n) + " names");
    for (size_t i = 0; i < n; ++i) {
      if (!std::isfinite(v[i])) return bad(key, c.names[i] + " is not finite");
      if (positive && !(v[i] > 0)) return bad(key, c.names[i] + " must be > 0, got " + num(v[i]));
      if (!positive && v[i] < 0) return bad(key, c.names[i] + " must be >= 0, got " + num(v[i]));
    }
    return Status::ok();
  };
  CRUCIBLE_RETURN_IF_ERROR(per_name("risk.market.spots", c.spots, true));
  CRUCIBLE_RETURN_IF_ERROR(per_name("risk.market.vols", c.vols, false));
  if (!c.drifts.empty()) {
    if (c.drifts.size() != n)
      return bad("risk.market.drifts", "has " + std::to_string(c.drifts.size()) + " values for " +
                                           std::to_string(n) + " names (or leave it empty)");
    for (size_t i = 0; i < n; ++i)
      if (!std::isfinite(c.drifts[i]))
        return bad("risk.market.drifts", c.names[i] + " is not finite");
  }
  if (!std::isfinite(c.rate) || std::fabs(c.rate) > 1)
    return bad("risk.market.rate", "must be in [-1, 1], got " + num(c.rate));
  if (!(c.rate_vol >= 0) || c.rate_vol > 1)
    return bad("risk.market.rate_vol",
               "must be in [0, 1] (absolute, per sqrt(year)), got " + num(c.rate_vol));
  const size_t m = c.correlation.size();
  if (m != n * n && m != (n + 1) * (n + 1))
    return bad("risk.market.correlation", "has " + std::to_string(m) + " values; expected " +
                                              std::to_string((n + 1) * (n + 1)) +
                                              " (names and rate) or " + std::to_string(n * n) +
                                              " (names only)");
  // Symmetry, unit diagonal and range here; positive definiteness (the
  // Cholesky pivots) in factor_model.cc, which names the smallest pivot.
  const size_t k = m == n * n ? n : n + 1;
  for (size_t i = 0; i < k; ++i)
    for (size_t j = 0; j < k; ++j) {
      const double x = c.correlation[i * k + j];
      const std::string at = "entry (" + std::to_string(i) + ", " + std::to_string(j) + ")";
      if (!std::isfinite(x) || x < -1 || x > 1)
        return bad("risk.market.correlation", at + " = " + num(x) + " is outside [-1, 1]");
      if (i == j && x != 1)
        return bad("risk.market.correlation",
                   at + " is on the diagonal and must be 1, got " + num(x));
      if (x != c.correlation[j * k + i])
        return bad("risk.market.correlation", at + " = " + num(x) + " differs from its mirror " +
                                                  num(c.correlation[j * k + i]) +
                                                  " (must be symmetric)");
    }
  return Status::ok();
}

}  // namespace crucible::sim::risk
