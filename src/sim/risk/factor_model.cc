#include "sim/risk/factor_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/rng.h"
#include "sim/risk/pricing.h"

namespace crucible::sim::risk {

namespace {
// (0, 1), 53 bits: never 0, so log() is finite (|z| <= 8.7).
inline double unit_open(uint32_t hi, uint32_t lo) {
  const uint64_t bits = ((uint64_t(hi) << 32) | lo) >> 11;
  return (double(bits) + 0.5) * 0x1.0p-53;
}
constexpr double kTwoPi = 6.28318530717958647692;
constexpr double kMinPivot = 1e-10;
}  // namespace

Result<FactorModel> FactorModel::make(const RiskConfig& c, uint64_t seed) {
  FactorModel m;
  m.n_ = int(c.names.size());
  m.names_ = c.names;
  m.spot_ = c.spots;
  m.vol_ = c.vols;
  m.drift_ = c.drifts.empty() ? std::vector<double>(m.n_, c.rate) : c.drifts;
  m.r0_ = c.rate;
  m.rate_vol_ = c.rate_vol;
  m.h_ = horizon_years(c);
  m.student_ = c.copula == "student";
  m.dof_ = c.dof;
  m.log_returns_ = c.returns == "log";
  const uint64_t k64 = splitmix64(seed ^ 0x7269736B00000000ull);  // "risk"
  m.key_[0] = uint32_t(k64);
  m.key_[1] = uint32_t(k64 >> 32);

  // The full (k, k) correlation; given over the names only, the rate is independent.
  const int k = m.n_ + 1;
  const bool with_rate = c.correlation.size() == size_t(k) * k;
  std::vector<double> C(size_t(k) * k, 0.0);
  for (int i = 0; i < k; ++i)
    for (int j = 0; j < k; ++j)
      C[i * k + j] = with_rate                ? c.correlation[i * k + j]
                     : (i < m.n_ && j < m.n_) ? c.correlation[i * m.n_ + j]
                                              : double(i == j);
  // LDL^T (no square roots), so that every pivot d_j can be computed and the
  // smallest named even past a negative one; then L_chol = L sqrt(D).
  std::vector<double> L(size_t(k) * k, 0.0), d(k, 0.0);
  int worst = -1;
  for (int j = 0; j < k; ++j) {
    double dj = C[j * k + j];
    for (int p = 0; p < j; ++p) dj -= L[j * k + p] * L[j * k + p] * d[p];
    d[j] = dj;
    if (worst < 0 || dj < d[worst]) worst = j;
    if (std::fabs(dj) < kMinPivot) break;  // singular: later pivots are undefined
    L[j * k + j] = 1;
    for (int i = j + 1; i < k; ++i) {
      double v = C[i * k + j];
      for (int p = 0; p < j; ++p) v -= L[i * k + p] * L[j * k + p] * d[p];
      L[i * k + j] = v / dj;
    }
  }
  if (d[worst] < kMinPivot) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.3g", d[worst]);
    const std::string who = worst < m.n_ ? "'" + m.names_[worst] + "'" : "the rate";
    return Status::invalid(
        std::string("[config] risk.market.correlation is ") +
        (std::fabs(d[worst]) < kMinPivot ? "singular" : "not positive definite") +
        ": smallest Cholesky pivot " + buf + " at factor " + std::to_string(worst) + " (" + who +
        "); every pivot must exceed 1e-10");
  }
  m.chol_.assign(size_t(k) * k, 0.0);
  for (int i = 0; i < k; ++i)
    for (int j = 0; j <= i; ++j) m.chol_[i * k + j] = L[i * k + j] * std::sqrt(d[j]);
  return m;
}

void FactorModel::draw(uint64_t s, uint32_t stream, double* z) const {
  const int count = normals_per_scenario();
  for (int b = 0; 2 * b < count; ++b) {
    const uint32_t ctr[4] = {uint32_t(s), uint32_t(s >> 32), stream, uint32_t(b)};
    uint32_t out[4];
    philox4x32(ctr, key_, out);
    // Box-Muller in double precision: two normals per 128-bit block.
    const double u1 = unit_open(out[0], out[1]), u2 = unit_open(out[2], out[3]);
    const double rad = std::sqrt(-2 * std::log(u1)), th = kTwoPi * u2;
    z[2 * b] = rad * std::cos(th);
    if (2 * b + 1 < count) z[2 * b + 1] = rad * std::sin(th);
  }
}

double FactorModel::uniform(uint64_t s, uint32_t stream) const {
  const uint32_t ctr[4] = {uint32_t(s), uint32_t(s >> 32), stream, 0};
  uint32_t out[4];
  philox4x32(ctr, key_, out);
  return unit_open(out[0], out[1]);
}

void FactorModel::solve_cholesky(const double* y, double* z) const {
  const int k = n_ + 1;
  for (int i = 0; i < k; ++i) {
    double v = y[i];
    for (int j = 0; j < i; ++j) v -= chol_[i * k + j] * z[j];
    z[i] = v / chol_[i * k + i];
  }
}

void FactorModel::state(const double* z, double* S, double* r, bool gaussian_only) const {
  const int k = n_ + 1;
  double xs[kMaxEquities + 1];
  for (int i = 0; i < k; ++i) {
    double y = 0;
    for (int j = 0; j <= i; ++j) y += chol_[i * k + j] * z[j];
    xs[i] = y;
  }
  if (student_ && !gaussian_only) {
    double w = 0;
    for (int j = 0; j < dof_; ++j) w += z[k + j] * z[k + j];
    const double scale = 1 / std::sqrt(w / dof_);
    for (int i = 0; i < k; ++i) {
      const double t = xs[i] * scale;
      // Through the smaller tail, so that no probability rounds to 1.
      xs[i] = t > 0 ? -norm_inv(student_t_upper_tail(t, dof_))
                    : norm_inv(student_t_upper_tail(-t, dof_));
    }
  }
  const double sqh = std::sqrt(h_);
  for (int i = 0; i < n_; ++i) {
    const double sig = vol_[i];
    if (log_returns_) {
      S[i] = spot_[i] * std::exp((drift_[i] - 0.5 * sig * sig) * h_ + sig * sqh * xs[i]);
    } else {
      S[i] = std::max(spot_[i] * (1 + drift_[i] * h_ + sig * sqh * xs[i]), 1e-12 * spot_[i]);
    }
  }
  *r = r0_ + rate_vol_ * sqh * xs[n_];
}

}  // namespace crucible::sim::risk
