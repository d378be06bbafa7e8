// The zonal polar filter: near the poles the longitude cells shrink
// (dx = a cos(phi) dlon), and an explicit step would be bound by the
// smallest of them. Poleward of phi_c the tendencies of h, u and v are
// filtered along each row (Arakawa & Lamb 1977; Takacs & Balgovind 1983)
// with, for zonal wavenumber k,
//
//   S_j(k) = min(1, cos(phi_j) / (cos(phi_c) * sin(min(k dlon, pi/2))))
//
// the least damping under which the centred zonal derivative's effective
// wavenumber S_j(k) |sin(k dlon)| / (a cos(phi_j) dlon) stays below that of
// the row at phi_c, 1 / (a cos(phi_c) dlon); S is non-increasing in k, so
// the 2-dx wave is damped most. S(0) = 1: the zonal mean of a row (and so the
// mass) is untouched.
//
// The filter multiplies each Fourier coefficient of the row by S_j(k): for
// nlon >= kFftMinLength with no prime factor above 5 (nlat = 360, 720, ...)
// by a mixed-radix FFT (two real rows per complex transform), otherwise by
// a circulant convolution with the kernel's nlon/2 + 1 weights, O(nlon^2)
// per row but vectorised, as fast as the FFT on the smaller grids. Both are fixed
// sequences of operations: the result does not depend on the thread or rank.
// Immutable after construction; apply() is thread-safe with distinct buffers.
#pragma once
#include <complex>
#include <vector>

#include "sim/climate/grid.h"

namespace crucible::sim::climate {

class PolarFilter {
 public:
  static constexpr int kFftMinLength = 512;
  // phi_c_deg >= 90: no row is filtered.
  PolarFilter(const Grid& g, double phi_c_deg);
  bool filtered(int j) const { return !response_[j].empty(); }
  // Each of x0, x1, x2 (nlon doubles, or null) := its filtered row j;
  // scratch holds scratch_doubles().
  void apply(int j, double* x0, double* x1, double* x2, double* scratch) const;
  size_t scratch_doubles() const;
  // The largest effective zonal wavenumber of row j's centred derivative,
  // max_k S_j(k) |sin(k dlon)| / (a cos(phi_j) dlon), 1/m.
  double max_zonal_wavenumber(int j) const { return kx_max_[j]; }
  // The damping factor of wavenumber k in row j (1 outside the filtered rows).
  double response(int j, int k) const;
  int filtered_rows() const;

 private:
  const Grid& g_;
  double cos_c_;
  std::vector<int> radix_;                       // factors of nlon (5, 3, 2), empty: no FFT
  std::vector<std::complex<double>> fwd_, inv_;  // exp(-+ 2 pi i t / nlon)
  std::vector<std::vector<double>>
      response_;  // per row: S(k) / nlon, k in [0, nlon); empty if unfiltered
  std::vector<std::vector<double>> weights_;  // per row, without FFT: the kernel w[0..nlon/2]
  std::vector<double> kx_max_;                // (nlat)
};

}  // namespace crucible::sim::climate
