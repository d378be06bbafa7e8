#include "sim/risk/pricing.h"

#include <algorithm>
#include <cmath>

namespace crucible::sim::risk {

namespace {
constexpr double kSqrt2 = 1.41421356237309504880;
constexpr double kSqrt2Pi = 2.50662827463100050242;

// ln Gamma without the global `signgam` write of std::lgamma (thread-safe).
double log_gamma(double x) {
  int sign = 0;
  return lgamma_r(x, &sign);
}

// Continued fraction of the incomplete beta (modified Lentz; Numerical Recipes 6.4).
double beta_continued_fraction(double a, double b, double x) {
  constexpr double kTiny = 1e-300, kEps = 1e-16;
  const double qab = a + b, qap = a + 1, qam = a - 1;
  double c = 1, d = 1 - qab * x / qap;
  if (std::fabs(d) < kTiny) d = kTiny;
  d = 1 / d;
  double h = d;
  for (int m = 1; m <= 300; ++m) {
    const int m2 = 2 * m;
    double aa = m * (b - m) * x / ((qam + m2) * (a + m2));
    d = 1 + aa * d;
    if (std::fabs(d) < kTiny) d = kTiny;
    c = 1 + aa / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1 / d;
    h *= d * c;
    aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
    d = 1 + aa * d;
    if (std::fabs(d) < kTiny) d = kTiny;
    c = 1 + aa / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1 / d;
    const double del = d * c;
    h *= del;
    if (std::fabs(del - 1) < kEps) break;
  }
  return h;
}

// I_x(a, b), the regularised incomplete beta function.
double incomplete_beta(double a, double b, double x) {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  const double front = std::exp(log_gamma(a + b) - log_gamma(a) - log_gamma(b) + a * std::log(x) +
                                b * std::log1p(-x));
  if (x < (a + 1) / (a + b + 2)) return front * beta_continued_fraction(a, b, x) / a;
  return 1 - front * beta_continued_fraction(b, a, 1 - x) / b;
}
}  // namespace

double norm_cdf(double x) { return 0.5 * std::erfc(-x / kSqrt2); }

double norm_inv(double p) {
  static constexpr double a[6] = {-3.969683028665376e+01, 2.209460984245205e+02,
                                  -2.759285104469687e+02, 1.383577518672690e+02,
                                  -3.066479806614716e+01, 2.506628277459239e+00};
  static constexpr double b[5] = {-5.447609879822406e+01, 1.615858368580409e+02,
                                  -1.556989798598866e+02, 6.680131188771972e+01,
                                  -1.328068155288572e+01};
  static constexpr double c[6] = {-7.784894002430293e-03, -3.223964580411365e-01,
                                  -2.400758277161838e+00, -2.549732539343734e+00,
                                  4.374664141464968e+00,  2.938163982698783e+00};
  static constexpr double d[4] = {7.784695709041462e-03, 3.224671290700398e-01,
                                  2.445134137142996e+00, 3.754408661907416e+00};
  constexpr double p_low = 0.02425;
  if (!(p > 0)) return -INFINITY;
  if (!(p < 1)) return INFINITY;
  double x;
  if (p < p_low) {
    const double q = std::sqrt(-2 * std::log(p));
    x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  } else if (p <= 1 - p_low) {
    const double q = p - 0.5, r = q * q;
    x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
  } else {
    const double q = std::sqrt(-2 * std::log1p(-p));
    x = -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  }
  // One Halley step on Phi(x) - p: the error of the rational form (1e-9) cubes.
  // For x > 0 the residual Phi(x) - p is taken as (1 - p) - Q(x), on the upper tail.
  const double e = x > 0 ? (1 - p) - 0.5 * std::erfc(x / kSqrt2) : 0.5 * std::erfc(-x / kSqrt2) - p;
  const double u = e * kSqrt2Pi * std::exp(0.5 * x * x);
  return x - u / (1 + 0.5 * x * u);
}

double student_t_upper_tail(double t, double nu) {
  if (t <= 0) return 0.5;
  const double x = nu / (nu + t * t);
  return 0.5 * incomplete_beta(0.5 * nu, 0.5, x);
}

double student_t_upper_quantile(double p, double nu) {
  if (!(p < 0.5)) return 0;
  double lo = -30, hi = 80;  // log t: t in [1e-13, 5e34]
  for (int it = 0; it < 200 && hi - lo > 1e-12; ++it) {
    const double mid = 0.5 * (lo + hi);
    (student_t_upper_tail(std::exp(mid), nu) > p ? lo : hi) = mid;
  }
  return std::exp(0.5 * (lo + hi));
}

double black_scholes(bool call, double S, double K, double r, double sigma, double T) {
  const double df = std::exp(-r * T);
  const double F = S / df;  // forward
  const double v = sigma * std::sqrt(T);
  if (!(v > 0)) return df * std::max(call ? F - K : K - F, 0.0);
  const double d1 = (std::log(F / K) + 0.5 * v * v) / v, d2 = d1 - v;
  if (call) return df * (F * norm_cdf(d1) - K * norm_cdf(d2));
  return df * (K * norm_cdf(-d2) - F * norm_cdf(-d1));
}

double asian_turnbull_wakeman(bool call, double S, double K, double r, double sigma,
                              const double* tau, int n) {
  // Moments of A = (1/n) sum_i S(tau_i) under the risk-neutral measure:
  //   M1 = (1/n) sum_i F_i,  F_i = S e^{r tau_i}
  //   M2 = (1/n^2) sum_ij F_i F_j e^{sigma^2 min(tau_i, tau_j)}
  //      = (1/n^2) sum_i F_i e^{sigma^2 tau_i} (F_i + 2 sum_{j>i} F_j)   (tau increasing)
  // A is taken lognormal with these moments: total variance ln(M2 / M1^2).
  double sum_f = 0, m2 = 0, suffix = 0;
  for (int i = n - 1; i >= 0; --i) {
    const double f = S * std::exp(r * tau[i]);
    m2 += f * std::exp(sigma * sigma * tau[i]) * (f + 2 * suffix);
    suffix += f;
    sum_f += f;
  }
  const double m1 = sum_f / n;
  m2 /= double(n) * n;
  const double T = tau[n - 1], df = std::exp(-r * T);
  const double var = std::log(m2 / (m1 * m1));
  const double v = var > 0 ? std::sqrt(var) : 0.0;
  if (!(v > 0)) return df * std::max(call ? m1 - K : K - m1, 0.0);
  const double d1 = (std::log(m1 / K) + 0.5 * var) / v, d2 = d1 - v;
  if (call) return df * (m1 * norm_cdf(d1) - K * norm_cdf(d2));
  return df * (K * norm_cdf(-d2) - m1 * norm_cdf(-d1));
}

double zero_bond(double r, double T) { return std::exp(-r * T); }

}  // namespace crucible::sim::risk
