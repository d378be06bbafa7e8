// ScenarioEngine: full revaluation of the portfolio in one scenario, crude
// and importance-sampled, plus the importance-sampling design.
//
// loss(z) = V(today's market, t = 0) - V(market after the horizon, t = h):
// the portfolio's loss over the horizon (positive = money lost), every
// instrument repriced in closed form (portfolio.h).
//
// Importance sampling (Glasserman, Heidelberger & Shahabuddin 2000): the
// tail event {loss > x} is sampled under a mean-shifted measure Z ~ N(mu, I)
// on the factor shocks. The delta-normal gradient g = dloss/dz at z = 0
// (central differences, gaussian copula) gives the loss's delta-normal sigma
// |g| and the direction u = g/|g|; x = tail_sigmas |g|; mu = t* u with t* the
// root of loss(t u) = x on the full repricing (the design point on u). Each
// IS sample carries the likelihood ratio exp(-mu.z - |mu|^2/2) (z the
// unshifted draw). Under the Student-t copula joint extremes come mostly
// from a small mixing variable W (all factors scaled up together): the
// Gaussian design point's factor moves x* are mapped back to t-variates T*,
// the most likely (z*, W*) producing them is taken (scenario_engine.cc),
// and the mixing normals are drawn with scale sqrt(W*) (Glasserman,
// Heidelberger & Shahabuddin 2002 twist the same variable), then refined by
// a few cross-entropy iterations on pilot draws (Rubinstein & Kroese 2004).
//
// The sampling density is the defensive mixture a q + (1 - a) p of the
// shifted q and the real p (Hesterberg 1995), a = kShiftedShare, chosen per
// scenario by a uniform of its own stream: the likelihood ratio
// p / (a q + (1 - a) p) stays below 1 / (1 - a), so tail regions the shift
// points away from (a book that also loses on rallies) are still sampled
// with bounded weights instead of rare, huge ones.
//
// Thread-safety: immutable after construction and design(); const methods
// may run on many threads.
#pragma once
#include <cstdint>
#include <vector>

#include "sim/risk/factor_model.h"
#include "sim/risk/portfolio.h"

namespace crucible::sim::risk {

// The share of importance samples drawn from the shifted measure.
inline constexpr double kShiftedShare = 0.8;

class ScenarioEngine {
 public:
  ScenarioEngine(FactorModel model, Portfolio portfolio);

  // Sets the tail threshold and shift for tail_sigmas > 0 (0: no IS).
  void design(double tail_sigmas);

  double value_today() const { return v0_; }
  // Loss for the normals z (FactorModel::normals_per_scenario() of them).
  double loss(const double* z, bool gaussian_only = false) const;
  // Scenario s under the real-world measure (stream kCrudeStream).
  double crude_loss(uint64_t s) const;
  // Scenario s under the shifted measure (kImportanceStream): the IS
  // estimator's term 1{loss > threshold} * likelihood ratio.
  double importance_term(uint64_t s) const;

  bool has_tail() const { return !shift_.empty(); }
  double threshold() const { return threshold_; }
  double delta_normal_sigma() const { return sigma_dn_; }  // |g|, currency units
  double delta_normal_mean() const { return mean_dn_; }    // loss(0)
  double shift_norm() const { return shift_norm_; }        // |mu|
  double mixing_scale() const { return mix_scale_; }       // s (1: unscaled)
  const FactorModel& model() const { return model_; }
  const Portfolio& portfolio() const { return portfolio_; }

 private:
  void refine_cross_entropy();

  FactorModel model_;
  Portfolio portfolio_;
  double v0_ = 0;
  double threshold_ = 0, sigma_dn_ = 0, mean_dn_ = 0, shift_norm_ = 0;
  std::vector<double> shift_;  // (k) mean shift of the factor shocks; empty: no IS
  double mix_scale_ = 1;       // Student-t: scale of the mixing normals under the shifted measure
};

}  // namespace crucible::sim::risk
