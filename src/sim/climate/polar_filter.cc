#include "sim/climate/polar_filter.h"

#include <algorithm>
#include <cmath>

namespace crucible::sim::climate {

namespace {

using cd = std::complex<double>;

// The plain product: operator* of std::complex calls __muldc3 (inf/NaN
// recovery, C99 Annex G) unless -fcx-limited-range, 6x slower here.
inline cd mul(cd a, cd b) {
  return cd(a.real() * b.real() - a.imag() * b.imag(), a.real() * b.imag() + a.imag() * b.real());
}

// The radices of n when n = 2^a 3^b 5^c (largest first), else empty.
std::vector<int> radices_of(int n) {
  std::vector<int> r;
  for (int p : {5, 3, 2})
    while (n % p == 0) r.push_back(p), n /= p;
  if (n != 1) r.clear();
  return r;
}

// out[0..n) := sum_t in[t * stride] w^(t k), w = exp(sign 2 pi i / n), by
// mixed-radix decimation in time. root[t] = exp(sign 2 pi i t / N) for the
// full length N; n divides N; radix[0..] factor n.
void fft(const cd* in, cd* out, int n, int stride, const cd* root, int N, const int* radix) {
  const int r = radix[0], m = n / r;
  if (m == 1) {
    for (int q = 0; q < r; ++q) out[q] = in[q * stride];
  } else {
    for (int q = 0; q < r; ++q)
      fft(in + q * stride, out + q * m, m, stride * r, root, N, radix + 1);
  }
  const int step = N / n;  // root index of w_n
  if (r == 2) {
    for (int k = 0; k < m; ++k) {
      const cd a = out[k], b = mul(out[m + k], root[k * step]);
      out[k] = a + b;
      out[m + k] = a - b;
    }
    return;
  }
  cd wr[5], t[5];  // wr[t] = w_r^t
  for (int q = 0; q < r; ++q) wr[q] = root[q * (N / r)];
  for (int k = 0; k < m; ++k) {
    t[0] = out[k];
    for (int q = 1; q < r; ++q) t[q] = mul(out[q * m + k], root[q * k * step]);  // q k < n <= N
    for (int s = 0; s < r; ++s) {
      cd acc = t[0];
      for (int q = 1, e = s; q < r; ++q, e = (e + s) % r) acc += mul(t[q], wr[e]);
      out[k + s * m] = acc;
    }
  }
}

// y[0..n) := the circulant convolution of x with the symmetric kernel w
// (n/2 + 1 weights); xx (2n) is scratch. For lengths with other prime
// factors than 2, 3, 5. One clone per instruction set.
__attribute__((target_clones("avx512f", "avx2", "default"))) void circulant_symmetric(
    const double* w, int n, double* x, double* scratch) {
  const int half = n / 2;
  double* __restrict xx = scratch;  // xx[t] = x[t mod n], t in [0, 2n)
  for (int i = 0; i < n; ++i) xx[i] = xx[i + n] = x[i];
  double* __restrict y = x;
  for (int i = 0; i < n; ++i) y[i] = w[0] * xx[i] + w[half] * xx[i + half];
  for (int m = 1; m < half; ++m) {
    const double wm = w[m];
    const double* __restrict lo = xx + n - m;  // x_{i-m}
    const double* __restrict hi = xx + m;      // x_{i+m}
    for (int i = 0; i < n; ++i) y[i] += wm * (lo[i] + hi[i]);
  }
}

}  // namespace

PolarFilter::PolarFilter(const Grid& g, double phi_c_deg) : g_(g) {
  cos_c_ = phi_c_deg >= 90 ? 0.0 : std::cos(phi_c_deg * kPi / 180);
  const int n = g.nlon, half = n / 2;
  // Measured (bench/sim_climate_bench, ND=): the vectorised O(n^2)
  // convolution is as fast as this plain recursive FFT up to n ~ 400 and
  // 1.5x slower at n = 720.
  if (n >= kFftMinLength) radix_ = radices_of(n);
  if (!radix_.empty()) {
    fwd_.resize(n);
    inv_.resize(n);
    for (int t = 0; t < n; ++t) {
      fwd_[t] = std::polar(1.0, -2 * kPi * t / n);
      inv_[t] = std::conj(fwd_[t]);
    }
  }
  response_.resize(g.nlat);
  weights_.resize(g.nlat);
  kx_max_.resize(g.nlat);
  for (int j = 0; j < g.nlat; ++j) {
    double kx = 0;
    for (int k = 0; k <= half; ++k)
      kx = std::max(kx, response(j, k) * std::abs(std::sin(k * g.dlon)));
    kx_max_[j] = kx / (kRadius * g.cos_lat[j] * g.dlon);
    if (cos_c_ == 0.0 || g.cos_lat[j] >= cos_c_) continue;
    std::vector<double>& s = response_[j];  // S(k) for k in [0, n): S(n - k) = S(k)
    s.resize(n);
    for (int k = 0; k < n; ++k)
      s[k] = response(j, std::min(k, n - k)) / n;  // 1/n: the inverse's scale
    if (!radix_.empty()) continue;
    // w[m] = (1/n) sum_k S(k) e^{i k m dlon}: real and symmetric since S(k) = S(-k).
    std::vector<double>& w = weights_[j];
    w.assign(half + 1, 0.0);
    for (int m = 0; m <= half; ++m) {
      double acc = response(j, 0) + response(j, half) * std::cos(kPi * m);
      for (int k = 1; k < half; ++k)
        acc += 2 * response(j, k) * std::cos(2 * kPi * double(k) * m / n);
      w[m] = acc / n;
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
  for (const auto& s : response_) n += !s.empty();
  return n;
}

size_t PolarFilter::scratch_doubles() const { return size_t(4) * g_.nlon; }

void PolarFilter::apply(int j, double* x0, double* x1, double* x2, double* scratch) const {
  if (response_[j].empty()) return;
  const int n = g_.nlon;
  if (radix_.empty()) {
    for (double* x : {x0, x1, x2})
      if (x) circulant_symmetric(weights_[j].data(), n, x, scratch);
    return;
  }
  // Two real rows per complex transform: z = a + i b; a real, symmetric
  // response keeps Re and Im apart, so Re(ifft(S fft(z))) is a filtered, Im b.
  cd* z = reinterpret_cast<cd*>(scratch);
  cd* spec = z + n;
  const double* s = response_[j].data();
  auto filter_pair = [&](double* a, double* b) {
    for (int i = 0; i < n; ++i) z[i] = cd(a[i], b ? b[i] : 0.0);
    fft(z, spec, n, 1, fwd_.data(), n, radix_.data());
    for (int k = 0; k < n; ++k) spec[k] = cd(spec[k].real() * s[k], spec[k].imag() * s[k]);
    fft(spec, z, n, 1, inv_.data(), n, radix_.data());
    for (int i = 0; i < n; ++i) a[i] = z[i].real();
    if (b)
      for (int i = 0; i < n; ++i) b[i] = z[i].imag();
  };
  if (x0) filter_pair(x0, x1);
  if (x2) filter_pair(x2, nullptr);
}

}  // namespace crucible::sim::climate
