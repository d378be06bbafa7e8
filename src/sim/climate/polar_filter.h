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
// The filter is a circulant convolution along the row (symmetric kernel of
// nlon/2 + 1 weights), applied in O(nlon^2) per filtered row: on the grids
// this model runs (nlon <= 1440) that costs less than an FFT's bookkeeping,
// and the loop vectorises. Immutable after construction; apply() is
// thread-safe with distinct buffers.
#pragma once
#include <vector>

#include "sim/climate/grid.h"

namespace crucible::sim::climate {

class PolarFilter {
 public:
  // phi_c_deg >= 90: no row is filtered.
  PolarFilter(const Grid& g, double phi_c_deg);
  bool filtered(int j) const { return !weights_[j].empty(); }
  // x[0..nlon) := the filtered row j; scratch holds 2*nlon doubles.
  void apply(int j, double* x, double* scratch) const;
  // The largest effective zonal wavenumber of row j's centred derivative,
  // max_k S_j(k) |sin(k dlon)| / (a cos(phi_j) dlon), 1/m.
  double max_zonal_wavenumber(int j) const { return kx_max_[j]; }
  // The damping factor of wavenumber k in row j (1 outside the filtered rows).
  double response(int j, int k) const;
  int filtered_rows() const;

 private:
  const Grid& g_;
  double cos_c_;
  std::vector<std::vector<double>> weights_;  // per row: w[0..nlon/2], empty if unfiltered
  std::vector<double> kx_max_;                // (nlat)
};

}  // namespace crucible::sim::climate
