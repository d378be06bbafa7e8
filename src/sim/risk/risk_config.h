// RiskConfig: the [risk] and [risk.market] keys of `crucible sim risk`
// (docs/sim/risk.md). A plain value type; risk_fields binds the keys to the
// members for runtime's TOML parser, validate_risk refuses impossible values
// with one "[config] risk.key: why" line. The portfolio itself (a CSV file or
// the rows of risk.instruments) is checked by the factory (risk.h), which
// reads it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/config_field.h"
#include "core/status.h"

namespace crucible::sim::risk {

// At most this many equity factors (a scenario's factor vector lives on the stack).
inline constexpr int kMaxEquities = 64;

// The defaults are configs/sim/risk.toml's: a small multi-asset book.
struct RiskConfig {
  // ---- [risk] ----
  // Monte Carlo scenarios in all, and per step (the last step may hold fewer).
  int64_t scenarios = 4000000;
  int64_t batch = 50000;
  // Risk horizon, trading days (252 a year).
  double horizon_days = 10;
  // VaR / ES confidence levels, each in (0, 1).
  config::DoubleList var_levels = {0.99, 0.999};
  // Dependence of the factor moves: "gaussian" | "student" (t copula, `dof` degrees of freedom).
  std::string copula = "student";
  int dof = 4;
  // Equity moves: "log" (GBM) | "simple" (S0 (1 + mu h + sigma sqrt(h) Z), Gaussian P&L).
  std::string returns = "log";
  // Importance-sampled tail: P(loss > tail_sigmas * delta-normal sigma); 0: off.
  double tail_sigmas = 5;
  // A CSV file of instruments (portfolio.h); when set it wins over `instruments`,
  // CSV rows "kind,underlying,quantity,strike,maturity,fixings" (no header).
  std::string portfolio;
  config::StringList instruments = {
      "equity,SPX,20000",
      "equity,SX5E,15000",
      "equity,NKY,10000",
      "european_call,SPX,-20000,110,0.25",
      "european_put,SPX,20000,90,0.5",
      "european_put,SX5E,-10000,85,1",
      "european_call,NKY,5000,100,2",
      "asian_call,NKY,8000,100,1,12",
      "asian_put,SX5E,6000,100,0.5,6",
      "asian_call,SPX,-4000,105,2,24",
      "zero_bond,,2000000,,2",
      "zero_bond,,3000000,,10",
  };
  // ---- [risk.market] ---- factors: the equities of `names`, then the short rate.
  // Equity factor names (the instruments' underlying), spots (currency units),
  // vols per sqrt(year) (simulation and pricing), real-world drifts per year
  // (empty: each equals the rate).
  config::StringList names = {"SPX", "SX5E", "NKY"};
  config::DoubleList spots = {100, 100, 100};
  config::DoubleList vols = {0.18, 0.22, 0.25};
  config::DoubleList drifts = {0.06, 0.05, 0.05};
  // Flat continuously compounded zero rate per year, and its normal vol
  // (absolute, per sqrt(year); 0: the rate is fixed).
  double rate = 0.03;
  double rate_vol = 0.01;
  // Row-major correlation of the factor moves: (n+1)^2 values over the names
  // then the rate, or n^2 over the names alone (the rate then independent).
  // clang-format off
  config::DoubleList correlation = { 1.0,  0.7,  0.5, -0.2,
                                     0.7,  1.0,  0.5, -0.2,
                                     0.5,  0.5,  1.0, -0.1,
                                    -0.2, -0.2, -0.1,  1.0};
  // clang-format on
};

std::vector<config::Field> risk_fields(RiskConfig& c);
Status validate_risk(const RiskConfig& c);

// The horizon in years.
inline double horizon_years(const RiskConfig& c) { return c.horizon_days / 252.0; }

}  // namespace crucible::sim::risk
