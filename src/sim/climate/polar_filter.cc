#include "sim/climate/polar_filter.h"

#include <algorithm>
#include <cmath>

namespace crucible::sim::climate {

PolarFilter::PolarFilter(const Grid& g, double phi_c_deg) : g_(g) {
  cos_c_ = phi_c_deg >= 90 ? 0.0 : std::cos(phi_c_deg * kPi / 180);
  const int n = g.nlon, half = n / 2;
  weights_.resize(g.nlat);
  kx_max_.resize(g.nlat);
  for (int j = 0; j < g.nlat; ++j) {
    double kx = 0;
    for (int k = 0; k <= half; ++k) kx = std::max(kx, response(j, k) * std::abs(std::sin(k * g.dlon)));
    kx_max_[j] = kx / (kRadius * g.cos_lat[j] * g.dlon);
    if (cos_c_ == 0.0 || g.cos_lat[j] >= cos_c_) continue;
    // w[m] = (1/n) sum_k S(k) e^{i k m dlon} over k in (-n/2, n/2]: real and
    // symmetric since S(k) = S(-k).
    std::vector<double>& w = weights_[j];
    w.assign(half + 1, 0.0);
    for (int m = 0; m <= half; ++m) {
      double s = response(j, 0) + response(j, half) * std::cos(kPi * m);
      for (int k = 1; k < half; ++k) s += 2 * response(j, k) * std::cos(2 * kPi * double(k) * m / n);
      w[m] = s / n;
    }
  }
}

double PolarFilter::response(int j, int k) const {
  if (k == 0 || cos_c_ == 0.0 || g_.cos_lat[j] >= cos_c_) return 1.0;
  const double s = std::sin(std::min(k * g_.dlon, kPi / 2));
  return std::min(1.0, g_.cos_lat[j] / (cos_c_ * s));
}

int PolarFilter::filtered_rows() const {
  int n = 0;
  for (const auto& w : weights_) n += !w.empty();
  return n;
}

namespace {
// y[0..n) := the circulant convolution of x with the symmetric kernel w
// (n/2 + 1 weights); xx (2n) is scratch. One clone per instruction set.
__attribute__((target_clones("avx512f", "avx2", "default"))) void circulant_symmetric(
    const double* w, int n, double* x, double* scratch) {
  const int half = n / 2;
  // xx[t] = x[t mod n] for t in [0, 2n): every shifted read is contiguous.
  double* __restrict xx = scratch;
  for (int i = 0; i < n; ++i) xx[i] = xx[i + n] = x[i];
  double* __restrict y = x;
  // y_i = w0 x_i + sum_{m=1}^{n/2-1} w_m (x_{i-m} + x_{i+m}) + w_{n/2} x_{i+n/2}
  for (int i = 0; i < n; ++i) y[i] = w[0] * xx[i] + w[half] * xx[i + half];
  for (int m = 1; m < half; ++m) {
    const double wm = w[m];
    const double* __restrict lo = xx + n - m;  // x_{i-m}
    const double* __restrict hi = xx + m;      // x_{i+m}
    for (int i = 0; i < n; ++i) y[i] += wm * (lo[i] + hi[i]);
  }
}
}  // namespace

void PolarFilter::apply(int j, double* x, double* scratch) const {
  const std::vector<double>& w = weights_[j];
  if (w.empty()) return;
  circulant_symmetric(w.data(), g_.nlon, x, scratch);
}

}  // namespace crucible::sim::climate
