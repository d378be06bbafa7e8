// `crucible sim risk`: Monte Carlo Value-at-Risk and Expected Shortfall of a
// portfolio of equities, European and Asian options and zero-coupon bonds
// under correlated factor moves (Gaussian or Student-t copula), with an
// importance-sampled rare-tail probability. docs/sim/risk.md.
//
// Work split: step b evaluates scenarios [b B, min((b+1) B, N)); rank q of P
// takes a contiguous share of each batch, OpenMP threads split that share.
// Scenario s's loss depends only on (seed, s), losses are kept by scenario
// index on every rank, and every sum and quantile is taken in an order fixed
// by the indices or the sorted values: the results are bit-identical for any
// rank and thread count and across kill/resume.
#pragma once
#include <cstdint>
#include <memory>

#include "comm/comm.h"
#include "core/status.h"
#include "sim/risk/risk_config.h"
#include "sim/workload.h"

namespace crucible::sim {

// Validates the config and the portfolio it names (file or rows), factors
// the correlation and designs the importance sampling. Bad input: one
// Status::invalid line naming the key, file:line or row; nothing written.
Result<std::unique_ptr<Workload>> make_risk_workload(const risk::RiskConfig& c, comm::Comm& comm,
                                                     uint64_t seed);

}  // namespace crucible::sim
