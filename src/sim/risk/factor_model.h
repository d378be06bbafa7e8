// FactorModel: the risk factors -- n equities, then the short rate -- and
// their joint move over the risk horizon h, driven by independent standard
// normals drawn from Philox (core/rng.h) keyed by (seed, scenario, stream).
//
// A scenario's normals z (normals_per_scenario() of them): z[0..k) are the
// factor shocks (k = n + 1), z[k..k+dof) feed the Student-t mixing variable.
//   y = L z[0..k)                    L: Cholesky factor of the correlation
//   gaussian copula:  x = y
//   student copula:   W = (1/dof) sum_j z[k+j]^2 ~ chi2(dof)/dof,  t = y / sqrt(W),
//                     x_i = Phi^{-1}(F_dof(t_i))   (t copula, normal margins:
//                     joint crashes, Demarta & McNeil 2005)
//   equity i, log:    S_i = S0_i exp((mu_i - sigma_i^2/2) h + sigma_i sqrt(h) x_i)
//   equity i, simple: S_i = S0_i (1 + mu_i h + sigma_i sqrt(h) x_i), floored at 1e-12 S0_i
//   rate:             r = r0 + rate_vol sqrt(h) x_n
// Scenario s's numbers depend only on (seed, s, stream): any rank or thread
// may compute any scenario, and the result does not depend on which did.
//
// Thread-safety: immutable after make(); every method is const.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "sim/risk/risk_config.h"

namespace crucible::sim::risk {

// Streams of a scenario's draws.
enum Stream : uint32_t {
  kCrudeStream = 0,
  kImportanceStream = 1,
  kMixtureStream = 2,
  kPilotStream = 16
};

class FactorModel {
 public:
  // Factors the correlation (its smallest LDL^T pivot must exceed 1e-10,
  // else Status::invalid naming that pivot and its factor).
  static Result<FactorModel> make(const RiskConfig& c, uint64_t seed);

  int equities() const { return n_; }
  int factors() const { return n_ + 1; }
  int normals_per_scenario() const { return n_ + 1 + (student_ ? dof_ : 0); }
  double horizon() const { return h_; }
  double rate() const { return r0_; }
  const std::vector<double>& spots() const { return spot_; }
  const std::vector<double>& vols() const { return vol_; }
  const std::vector<std::string>& names() const { return names_; }

  // z[0..normals_per_scenario()) := the normals of scenario s in `stream`.
  void draw(uint64_t s, uint32_t stream, double* z) const;
  // One uniform in (0, 1) of scenario s in `stream`.
  double uniform(uint64_t s, uint32_t stream) const;
  // The market after the horizon: S[0..n), *r. gaussian_only: ignore the
  // copula (used for the delta-normal design of importance sampling).
  void state(const double* z, double* S, double* r, bool gaussian_only = false) const;
  // z[0..k) := L^{-1} y[0..k): the independent shocks behind correlated ones.
  void solve_cholesky(const double* y, double* z) const;

 private:
  int n_ = 0, dof_ = 0;
  bool student_ = false, log_returns_ = true;
  double h_ = 0, r0_ = 0, rate_vol_ = 0;
  uint32_t key_[2] = {0, 0};
  std::vector<std::string> names_;
  std::vector<double> spot_, vol_, drift_;
  std::vector<double> chol_;  // (k, k) lower triangle, row-major
};

}  // namespace crucible::sim::risk
