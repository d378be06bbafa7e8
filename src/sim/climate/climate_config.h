// ClimateConfig: the keys of `crucible sim climate` (the [climate] section),
// their defaults and units, and the checks that need no grid or initial state.
// The factory (climate.h) adds the checks that do (the CFL limit of
// climate.dt_s, the row count against the ranks). Plain data; thread-compatible.
#pragma once
#include <vector>

#include "core/config_field.h"
#include "core/status.h"

namespace crucible::sim {

struct ClimateConfig {
  // Williamson et al. (1992) test case: 2 (steady geostrophic flow, analytic
  // solution), 5 (zonal flow over an isolated mountain), 6 (Rossby-Haurwitz
  // wave of wavenumber 4).
  int test_case = 6;
  // Grid rows (latitude cells, each 180/nlat degrees); the grid has 2*nlat
  // longitude cells, so cells are square at the equator. Even, >= 8.
  int nlat = 120;
  // Simulated time, days (of 86400 s).
  double days = 14.0;
  // Time step, seconds; 0: 0.8 of the CFL limit. The step used is the
  // largest one <= dt_s that divides days exactly (steps = ceil(T / dt_s)),
  // and, when output_every_h divides days, every output interval too.
  double dt_s = 0.0;
  // Case 2 only: angle between the flow's axis and the Earth's, degrees
  // (Williamson's alpha; 0: along the equator, 90: over the poles).
  double alpha_deg = 0.0;
  // Latitude (degrees) poleward of which the zonal Fourier filter damps
  // tendencies so that no row limits the time step more than this one.
  double polar_filter_lat_deg = 60.0;
  // Optional grid-scale damping of u and v (swe_solver.h), as the
  // e-folding time (hours) of the checkerboard wave; on smooth fields it is
  // a diffusion nu = (a dlat)^2 / (8 tau), shrinking with the grid squared.
  // 0: none (the default: the scheme is stable without it).
  double damping_time_h = 0.0;
  // Hours between the snapshots of h, u, v kept for climate.nc (and the
  // report's maps); the initial and final states are always kept.
  double output_every_h = 24.0;
  // Steps between conservation diagnostics (mass, energy, enstrophy and, for
  // case 2, the error norms); every metrics row shows the latest ones.
  int diag_every = 10;
};

// The Fields binding "climate.*" keys to c's members (c must outlive them).
std::vector<config::Field> climate_fields(ClimateConfig& c);

// Impossible values -> Status::invalid("[config] climate.key: why").
Status validate_climate(const ClimateConfig& c);

}  // namespace crucible::sim
