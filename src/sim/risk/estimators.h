// Estimators over the scenario losses: Value-at-Risk and Expected Shortfall
// with confidence intervals, and the importance-sampling tail probability.
//
// VaR_a is the empirical a-quantile L_(ceil(n a)) of the n losses (1-based
// order statistics); its 95% interval is distribution-free, the order
// statistics at n a -+ 1.96 sqrt(n a (1-a)) (the binomial count of losses
// below the true quantile); its standard error is that interval's half-width
// / 1.96. ES_a is the mean of L_(j), j >= ceil(n a); its standard error is
// sqrt((s_tail^2 + a (ES - VaR)^2) / (n (1-a))) (the asymptotic variance of
// the tail mean, e.g. Manistre & Hancock 2005), s_tail the tail's sample sd.
// Every result depends only on the multiset of losses (sorting fixes the
// order of every sum), never on the order they came in.
//
// Thread-safety: pure functions.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace crucible::sim::risk {

struct TailEstimate {
  double level = 0;
  double var = 0, var_lo = 0, var_hi = 0, var_se = 0;  // 95% interval [var_lo, var_hi]
  double es = 0, es_se = 0;
};

// loss[0..n): the losses (unchanged); scratch: reused workspace.
std::vector<TailEstimate> estimate_tail(const double* loss, int64_t n,
                                        const std::vector<double>& levels,
                                        std::vector<double>* scratch);

// The importance-sampling estimate of P(loss > x) from n terms y_s (zero, or
// the likelihood ratio of a sample beyond x), given their sum and sum of
// squares. vrf: the variance-reduction factor per sample against crude Monte
// Carlo, p (1 - p) / Var(y), at equal cost per sample (one repricing each).
struct TailProbability {
  double p = 0, se = 0, vrf = 0;
};
TailProbability importance_estimate(double sum, double sum_sq, int64_t n);

// The "99" of 0.99, "99_9" of 0.999: metric names' suffix for a level.
std::string level_tag(double level);

}  // namespace crucible::sim::risk
