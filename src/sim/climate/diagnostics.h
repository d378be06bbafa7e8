// Global diagnostics of the shallow-water state (Williamson et al. 1992,
// section 3): total mass, total energy, potential enstrophy and, where the
// case has an exact solution, the normalised l1, l2 and linf errors of h.
//
//   mass       I(h)
//   energy     I(h |v|^2 / 2 + g (h^2 + 2 h hs) / 2)     (= 1/2 g((h+hs)^2 - hs^2) + kinetic)
//   enstrophy  I((zeta + f)^2 / (2 h))
//   l1 = I(|h - hT|) / I(|hT|),  l2 = sqrt(I((h - hT)^2) / I(hT^2)),
//   linf = max|h - hT| / max|hT|
// with I the area-weighted sum over cells (m^2 times the integrand).
//
// Determinism: each rank sums its rows along i in order; the row sums are
// gathered to every rank and added in row order 0..nlat-1, so the figures
// are bit-identical over any number of ranks and threads. Collective.
#pragma once
#include <vector>

#include "comm/comm.h"
#include "core/status.h"
#include "sim/climate/swe_solver.h"

namespace crucible::sim::climate {

struct Diagnostics {
  double mass = 0, energy = 0, enstrophy = 0;
  bool has_errors = false;
  double l1 = 0, l2 = 0, linf = 0;
};

// h_exact: the band's exact h, rows x nlon (null when the case has none).
Result<Diagnostics> diagnose(SweSolver& solver, const std::vector<double>* h_exact,
                             comm::Comm& comm);

}  // namespace crucible::sim::climate
