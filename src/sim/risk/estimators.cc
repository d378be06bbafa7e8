#include "sim/risk/estimators.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace crucible::sim::risk {

namespace {
constexpr double kZ95 = 1.959963984540054;
// 1-based order-statistic index, clamped to [1, n].
int64_t clamp_index(double j, int64_t n) {
  return std::min<int64_t>(n, std::max<int64_t>(1, int64_t(j)));
}
}  // namespace

std::vector<TailEstimate> estimate_tail(const double* loss, int64_t n,
                                        const std::vector<double>& levels,
                                        std::vector<double>* scratch) {
  std::vector<TailEstimate> out;
  if (n <= 0) return out;
  struct Index {
    int64_t var, lo, hi;
  };
  std::vector<Index> idx;
  int64_t first = n;
  for (double a : levels) {
    const double na = double(n) * a, hw = kZ95 * std::sqrt(na * (1 - a));
    Index ix{clamp_index(std::ceil(na), n), clamp_index(std::floor(na - hw), n),
             clamp_index(std::ceil(na + hw), n)};
    idx.push_back(ix);
    first = std::min(first, ix.lo);
  }
  // Every order statistic needed lies at or above `first`: partition there,
  // then sort the (small) upper part.
  scratch->assign(loss, loss + n);
  double* L = scratch->data();
  std::nth_element(L, L + (first - 1), L + n);
  std::sort(L + (first - 1), L + n);
  for (size_t q = 0; q < levels.size(); ++q) {
    const double a = levels[q];
    TailEstimate e;
    e.level = a;
    e.var = L[idx[q].var - 1];
    e.var_lo = L[idx[q].lo - 1];
    e.var_hi = L[idx[q].hi - 1];
    e.var_se = (e.var_hi - e.var_lo) / (2 * kZ95);
    const int64_t m = n - idx[q].var + 1;
    double sum = 0;
    for (int64_t j = idx[q].var - 1; j < n; ++j) sum += L[j];
    e.es = sum / double(m);
    double ss = 0;
    for (int64_t j = idx[q].var - 1; j < n; ++j) ss += (L[j] - e.es) * (L[j] - e.es);
    const double s2 = m > 1 ? ss / double(m - 1) : 0.0;
    e.es_se = std::sqrt((s2 + a * (e.es - e.var) * (e.es - e.var)) / (double(n) * (1 - a)));
    out.push_back(e);
  }
  return out;
}

TailProbability importance_estimate(double sum, double sum_sq, int64_t n) {
  TailProbability t;
  if (n <= 0) return t;
  t.p = sum / double(n);
  const double var = n > 1 ? std::max(0.0, (sum_sq - double(n) * t.p * t.p) / double(n - 1)) : 0.0;
  t.se = std::sqrt(var / double(n));
  t.vrf = var > 0 ? t.p * (1 - t.p) / var : 0.0;
  return t;
}

std::string level_tag(double level) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", level * 100);
  std::string s = buf;
  std::replace(s.begin(), s.end(), '.', '_');
  return s;
}

}  // namespace crucible::sim::risk
