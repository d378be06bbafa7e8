#include "sim/climate/cfl.h"

#include <algorithm>
#include <cmath>

namespace crucible::sim::climate {

CflLimit cfl_limit(const Grid& g, const Williamson& w, const PolarFilter& filter,
                   double damping_rate) {
  const std::vector<RowGeom> geom = row_geometry(g, w, damping_rate);
  const double ky = 1.0 / (kRadius * g.dlat);
  double worst = 0, fastest = 0, kmax = ky;
  for (int j = 0; j < g.nlat; ++j) {
    const double kx = filter.max_zonal_wavenumber(j);
    kmax = std::max(kmax, kx);
    const double k = std::sqrt(kx * kx + ky * ky);
    const double diff = 8 * geom[j].damp;  // the damping's largest (real) eigenvalue
    for (int i = 0; i < g.nlon; ++i) {
      const PointState p = w.initial(g.lon[i], g.lat[j]);
      const double c = std::sqrt(kGravity * std::max(p.h, 0.0));
      const double f = std::abs(w.coriolis(g.lon[i], g.lat[j]));
      worst = std::max(worst, std::abs(p.u) * kx + std::abs(p.v) * ky + c * k + f + diff);
      fastest = std::max(fastest, std::sqrt(p.u * p.u + p.v * p.v) + c);
    }
  }
  CflLimit r;
  r.dt_max_s = 2 * std::sqrt(2.0) / worst;
  r.fastest_wave_ms = fastest;
  r.min_dx_m = 1.0 / kmax;
  return r;
}

}  // namespace crucible::sim::climate
