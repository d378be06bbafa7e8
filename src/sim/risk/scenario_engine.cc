#include "sim/risk/scenario_engine.h"

#include <algorithm>
#include <cmath>

#include "sim/risk/pricing.h"

namespace crucible::sim::risk {

namespace {
constexpr int kMaxNormals = kMaxEquities + 1 + 200;  // factors + the largest dof
}

ScenarioEngine::ScenarioEngine(FactorModel model, Portfolio portfolio)
    : model_(std::move(model)), portfolio_(std::move(portfolio)) {
  v0_ = portfolio_.value(model_.spots().data(), model_.rate(), model_.vols().data(), 0.0);
}

double ScenarioEngine::loss(const double* z, bool gaussian_only) const {
  double S[kMaxEquities], r = 0;
  model_.state(z, S, &r, gaussian_only);
  return v0_ - portfolio_.value(S, r, model_.vols().data(), model_.horizon());
}

double ScenarioEngine::crude_loss(uint64_t s) const {
  double z[kMaxNormals];
  model_.draw(s, kCrudeStream, z);
  return loss(z);
}

double ScenarioEngine::importance_term(uint64_t s) const {
  double z[kMaxNormals];
  model_.draw(s, kImportanceStream, z);
  const int k = model_.factors(), m = model_.normals_per_scenario(), dof = m - k;
  const bool shifted = model_.uniform(s, kMixtureStream) < kShiftedShare;
  if (shifted) {
    for (int i = 0; i < k; ++i) z[i] += shift_[i];
    for (int j = k; j < m; ++j) z[j] *= mix_scale_;
  }
  if (!(loss(z) > threshold_)) return 0.0;
  // q/p at the sample: the shifted component's density over the real one,
  // ln = mu.z - |mu|^2/2 - dof ln s + (1 - 1/s^2) sum_j v_j^2 / 2.
  double dot = 0, sum_sq = 0;
  for (int i = 0; i < k; ++i) dot += shift_[i] * z[i];
  for (int j = k; j < m; ++j) sum_sq += z[j] * z[j];
  const double log_ratio =
      dot - 0.5 * shift_norm_ * shift_norm_ -
      (dof ? dof * std::log(mix_scale_) - 0.5 * (1 - 1 / (mix_scale_ * mix_scale_)) * sum_sq : 0.0);
  // Defensive mixture (Hesterberg 1995): p / (a q + (1 - a) p) <= 1 / (1 - a).
  return 1.0 / (kShiftedShare * std::exp(log_ratio) + (1 - kShiftedShare));
}

void ScenarioEngine::design(double tail_sigmas) {
  shift_.clear();
  const int k = model_.factors(), m = model_.normals_per_scenario(), dof = m - k;
  // z = 0 on the shocks and 1 on the mixing normals (W = 1).
  std::vector<double> z(m, 0.0);
  for (int j = k; j < m; ++j) z[j] = 1.0;
  mean_dn_ = loss(z.data(), true);
  std::vector<double> g(k);
  constexpr double eps = 1e-4;
  double g2 = 0;
  for (int i = 0; i < k; ++i) {
    z[i] = eps;
    const double up = loss(z.data(), true);
    z[i] = -eps;
    const double down = loss(z.data(), true);
    z[i] = 0;
    g[i] = (up - down) / (2 * eps);
    g2 += g[i] * g[i];
  }
  sigma_dn_ = std::sqrt(g2);
  if (!(tail_sigmas > 0) || !(sigma_dn_ > 0)) return;
  threshold_ = tail_sigmas * sigma_dn_;
  // The Gaussian design point x* = t* u on the full repricing: loss(t u) =
  // threshold, bisected; where the loss along u never reaches it, the
  // linear guess t* = tail_sigmas.
  auto along = [&](double t) {
    for (int i = 0; i < k; ++i) z[i] = t * g[i] / sigma_dn_;
    for (int j = k; j < m; ++j) z[j] = 1.0;
    return loss(z.data(), true);
  };
  double t_star = tail_sigmas, lo = 0, hi = 12;
  if (along(hi) > threshold_ && !(along(lo) > threshold_)) {
    for (int it = 0; it < 80; ++it) {
      const double mid = 0.5 * (lo + hi);
      (along(mid) > threshold_ ? hi : lo) = mid;
    }
    t_star = 0.5 * (lo + hi);
  }
  shift_.resize(k);
  for (int i = 0; i < k; ++i) shift_[i] = t_star * g[i] / sigma_dn_;
  shift_norm_ = t_star;
  mix_scale_ = 1;
  if (dof == 0) return;
  // t copula: the same factor moves x* come from t-variates T*_i =
  // F_dof^{-1}(Phi(x*_i)), i.e. from shocks y = sqrt(W) T* = L z. The most
  // likely (z, W) on that ray minimises W |c|^2/2 - ln f_W(W), c = L^{-1} T*,
  // f_W the density of chi2(dof)/dof: W* = (dof/2 - 1) / (|c|^2/2 + dof/2)
  // (floored at dof/2 - 1 = 1/2 for dof <= 2), z* = sqrt(W*) c.
  std::vector<double> T(k), c(k);
  for (int i = 0; i < k; ++i) {
    const double t = student_t_upper_quantile(norm_cdf(-std::fabs(shift_[i])), dof);
    T[i] = shift_[i] < 0 ? -t : t;
  }
  model_.solve_cholesky(T.data(), c.data());
  double c2 = 0;
  for (double ci : c) c2 += ci * ci;
  const double w_star = std::max(0.5 * dof - 1, 0.5) / (0.5 * c2 + 0.5 * dof);
  mix_scale_ = std::sqrt(w_star);
  for (int i = 0; i < k; ++i) shift_[i] = mix_scale_ * c[i];
  refine_cross_entropy();
  double norm2 = 0;
  for (double x : shift_) norm2 += x * x;
  shift_norm_ = std::sqrt(norm2);
}

// Cross-entropy refinement (Rubinstein & Kroese 2004) of (mu, s) from the
// design point: draw pilot samples from the current shifted measure, keep the
// elite (losses above min(threshold, the 90% quantile)), and refit mu to their
// likelihood-weighted mean shock and s^2 to their weighted mean squared mixing
// normal. Pilot draws come from their own streams and every sum runs in
// sample order, so the design is a function of (config, seed) alone.
void ScenarioEngine::refine_cross_entropy() {
  // Multilevel: the elite level climbs toward the threshold; two iterations
  // more once it is reached, at most kIterations in all.
  constexpr int kIterations = 24, kPilot = 4000;
  int at_threshold = 0;
  const int k = model_.factors(), m = model_.normals_per_scenario(), dof = m - k;
  std::vector<double> Z(size_t(kPilot) * m), L(kPilot), W(kPilot), sorted;
  for (int it = 0; it < kIterations; ++it) {
    double mu2 = 0;
    for (double x : shift_) mu2 += x * x;
    for (int n = 0; n < kPilot; ++n) {
      double* z = Z.data() + size_t(n) * m;
      model_.draw(uint64_t(n), kPilotStream + uint32_t(it), z);
      double dot = 0, sum_sq = 0;
      for (int i = 0; i < k; ++i) {
        z[i] += shift_[i];
        dot += shift_[i] * z[i];
      }
      for (int j = k; j < m; ++j) {
        z[j] *= mix_scale_;
        sum_sq += z[j] * z[j];
      }
      L[n] = loss(z);
      W[n] = -(dot - 0.5 * mu2 -
               (dof * std::log(mix_scale_) - 0.5 * (1 - 1 / (mix_scale_ * mix_scale_)) * sum_sq));
    }
    sorted = L;
    std::sort(sorted.begin(), sorted.end());
    const double level = std::min(threshold_, sorted[size_t(0.9 * kPilot)]);
    double wsum = 0, vsum = 0;
    std::vector<double> mu(k, 0.0);
    for (int n = 0; n < kPilot; ++n) {
      if (!(L[n] >= level)) continue;
      const double w = std::exp(W[n]);
      const double* z = Z.data() + size_t(n) * m;
      wsum += w;
      for (int i = 0; i < k; ++i) mu[i] += w * z[i];
      double v = 0;
      for (int j = k; j < m; ++j) v += z[j] * z[j];
      vsum += w * v / dof;
    }
    if (!(wsum > 0) || !std::isfinite(wsum)) return;
    for (int i = 0; i < k; ++i) shift_[i] = mu[i] / wsum;
    mix_scale_ = std::sqrt(vsum / wsum);
    if (level >= threshold_ && ++at_threshold == 2) return;
  }
}

}  // namespace crucible::sim::risk
