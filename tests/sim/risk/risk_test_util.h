// Helpers of the risk workload's tests: small configs and a driver loop that
// runs a workload the way runtime's sim driver does (steps, save, load, finish).
#pragma once
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "comm/comm.h"
#include "sim/risk/risk.h"

namespace crucible::sim::risk::testing {

// Three equities, the rate, one instrument of every kind (independent of
// RiskConfig's defaults); `scenarios` in
// batches of `batch`.
inline RiskConfig mixed_book(int64_t scenarios, int64_t batch) {
  RiskConfig c;
  c.scenarios = scenarios;
  c.batch = batch;
  c.copula = "gaussian";
  c.names = {"SPX", "SX5E", "NKY"};
  c.spots = {100, 100, 100};
  c.vols = {0.2, 0.2, 0.2};
  c.drifts = {};  // the rate
  c.rate = 0.03;
  c.rate_vol = 0.01;
  c.correlation = {1, 0.6, 0.4, -0.2, 0.6, 1, 0.5, -0.1, 0.4, 0.5, 1, 0, -0.2, -0.1, 0, 1};
  c.instruments = {"equity,SPX,1000",
                   "european_call,SX5E,-500,105,0.5",
                   "european_put,SPX,800,90,1",
                   "asian_call,NKY,400,100,1,12",
                   "asian_put,SX5E,300,95,0.75,9",
                   "zero_bond,,50000,,5"};
  return c;
}

// Runs `w` from its current step to the end; the summary of finish().
inline nlohmann::json run_to_end(Workload& w, const std::string& dir) {
  while (w.steps_done() < w.total_steps()) {
    Status s = w.step();
    EXPECT_TRUE(s.is_ok()) << s.message();
    if (!s.is_ok()) break;
  }
  Result<nlohmann::json> r = w.finish(dir);
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  return r.is_ok() ? *r : nlohmann::json();
}

inline std::unique_ptr<Workload> make(const RiskConfig& c, comm::Comm& comm, uint64_t seed = 1234) {
  Result<std::unique_ptr<Workload>> w = make_risk_workload(c, comm, seed);
  EXPECT_TRUE(w.is_ok()) << w.status().message();
  return w.is_ok() ? std::move(*w) : nullptr;
}

}  // namespace crucible::sim::risk::testing
