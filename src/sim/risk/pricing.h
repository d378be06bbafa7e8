// Closed-form repricing of the risk portfolio's instruments at one market
// state, and the distribution functions the scenario generator needs.
//
// Conventions: times in years from the valuation date, rates continuously
// compounded per year, vols per sqrt(year), no dividends. Every function is
// pure (no state), deterministic, thread-safe, and defined for the inputs the
// portfolio validation admits (T > 0, sigma >= 0, S > 0, K > 0); a degenerate
// input such as sigma*sqrt(T) == 0 gives the intrinsic (forward) value.
//
// The Asian price is the Turnbull-Wakeman two-moment lognormal approximation
// of the discrete arithmetic average (Turnbull & Wakeman 1991; Levy 1992;
// Haug 2006 pp. 192-202), the method QuantLib's TurnbullWakemanAsianEngine
// implements; tests check it against QuantLib's Monte Carlo engine.
#pragma once

namespace crucible::sim::risk {

// Phi(x), the standard normal CDF, to full double precision (erfc).
double norm_cdf(double x);
// Phi^{-1}(p) for p in (0, 1): Acklam's rational approximation refined by one
// Halley step on erfc, relative error ~1e-15 down to p = 1e-300.
double norm_inv(double p);
// P(T > t) for Student's t with nu > 0 degrees of freedom and t >= 0, through
// the regularised incomplete beta I_x(nu/2, 1/2), x = nu/(nu+t^2): accurate in
// the far tail (no 1 - CDF cancellation).
double student_t_upper_tail(double t, double nu);
// The t >= 0 with student_t_upper_tail(t, nu) = p, p in (0, 1/2]: bisection
// on log t (to 1e-12 relative), for designing, not for the hot loop.
double student_t_upper_quantile(double p, double nu);

// Black-Scholes price of a European call (call = true) or put, spot S,
// strike K, rate r, vol sigma, time to expiry T.
double black_scholes(bool call, double S, double K, double r, double sigma, double T);

// Discrete arithmetic-average price option: the average of S at the n fixing
// times tau[0..n) (all > 0, increasing), paid at tau[n-1]; Turnbull-Wakeman.
double asian_turnbull_wakeman(bool call, double S, double K, double r, double sigma,
                              const double* tau, int n);

// Price of a zero-coupon bond paying 1 at T.
double zero_bond(double r, double T);

}  // namespace crucible::sim::risk
