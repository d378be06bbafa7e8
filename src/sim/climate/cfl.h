// The explicit time step's stability limit, from the initial state.
//
// Centred differences give each Fourier mode a purely imaginary eigenvalue;
// for the linearised shallow-water system its magnitude is at most
//   |u| kx + |v| ky + c sqrt(kx^2 + ky^2) + |f|,   c = sqrt(g h)
// with kx, ky the largest effective wavenumbers of the centred derivative:
// ky = 1 / (a dlat) and kx of each row as the polar filter leaves it
// (PolarFilter::max_zonal_wavenumber). Classical RK4 is stable on the
// imaginary axis up to |lambda dt| = 2 sqrt(2), so
//   dt_max = 2 sqrt(2) / max over cells of that bound.
// Pure function; thread-safe.
#pragma once
#include "sim/climate/grid.h"
#include "sim/climate/polar_filter.h"
#include "sim/climate/swe_solver.h"
#include "sim/climate/williamson.h"

namespace crucible::sim::climate {

struct CflLimit {
  double dt_max_s = 0;         // the limit, s
  double fastest_wave_ms = 0;  // max over cells of |v| + sqrt(g h), m/s
  double min_dx_m = 0;         // smallest effective grid length 1 / max(kx, ky), m
};

CflLimit cfl_limit(const Grid& g, const Williamson& w, const PolarFilter& filter,
                   double damping_rate);

}  // namespace crucible::sim::climate
