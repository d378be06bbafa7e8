#include "sim/climate/diagnostics.h"

#include <algorithm>
#include <cmath>

#include "core/trace.h"

namespace crucible::sim::climate {

namespace {
// Per row: mass, energy, enstrophy, I|e|, I|hT|, I e^2, I hT^2, max|e|, max|hT|.
constexpr int kRowSums = 9;
}  // namespace

Result<Diagnostics> diagnose(SweSolver& s, const std::vector<double>* h_exact, comm::Comm& comm) {
  CRUCIBLE_RETURN_IF_ERROR(s.refresh_halos());
  trace::Scope scope("diagnostics", "sim");
  const Grid& g = s.grid();
  const Band band = s.band();
  int max_rows = 0;
  for (const Band& b : s.bands()) max_rows = std::max(max_rows, b.rows());
  const int n = s.nlon();
  const Fields& y = s.fields();
  std::vector<double> mine(size_t(max_rows) * kRowSums, 0.0);
#pragma omp parallel for schedule(static)
  for (int jl = 0; jl < s.rows(); ++jl) {
    const int j = band.j0 + jl;
    const RowGeom& rg = s.geom(j);
    const double inv_2dlon = 0.5 / g.dlon, inv_2dlat = 0.5 / g.dlat;
    double r[kRowSums] = {0, 0, 0, 0, 0, 0, 0, 0, 0};
    for (int i = 0; i < n; ++i) {
      const size_t c = s.at(jl, i);
      const double h = y.h[c], u = y.u[c], v = y.v[c], hs = s.surface(jl, i);
      // The same centred vorticity as the step's (swe_solver.cc).
      const double zeta =
          ((y.v[c + 1] - y.v[c - 1]) * inv_2dlon -
           (y.u[s.at(jl + 1, i)] * rg.cos_n - y.u[s.at(jl - 1, i)] * rg.cos_s) * inv_2dlat) *
          rg.inv_acos;
      const double q = zeta + s.coriolis(jl, i);
      r[0] += h;
      r[1] += 0.5 * h * (u * u + v * v) + 0.5 * kGravity * (h * h + 2 * h * hs);
      r[2] += q * q / (2 * h);
      if (h_exact) {
        const double ht = (*h_exact)[size_t(jl) * n + i], e = h - ht;
        r[3] += std::abs(e);
        r[4] += std::abs(ht);
        r[5] += e * e;
        r[6] += ht * ht;
        r[7] = std::max(r[7], std::abs(e));
        r[8] = std::max(r[8], std::abs(ht));
      }
    }
    for (int k = 0; k < 7; ++k) r[k] *= g.area[j];
    std::copy(r, r + kRowSums, &mine[size_t(jl) * kRowSums]);
  }
  std::vector<double> all(mine.size() * comm.size());
  CRUCIBLE_RETURN_IF_ERROR(
      comm.allgather_bytes(mine.data(), mine.size() * sizeof(double), all.data()));
  double t[kRowSums] = {0, 0, 0, 0, 0, 0, 0, 0, 0};
  for (int rank = 0; rank < comm.size(); ++rank) {  // bands are in row order
    const Band b = s.bands()[rank];
    for (int jl = 0; jl < b.rows(); ++jl) {
      const double* r = &all[(size_t(rank) * max_rows + jl) * kRowSums];
      for (int k = 0; k < 7; ++k) t[k] += r[k];
      t[7] = std::max(t[7], r[7]);
      t[8] = std::max(t[8], r[8]);
    }
  }
  Diagnostics d;
  d.mass = t[0];
  d.energy = t[1];
  d.enstrophy = t[2];
  if (h_exact) {
    d.has_errors = true;
    d.l1 = t[3] / t[4];
    d.l2 = std::sqrt(t[5] / t[6]);
    d.linf = t[7] / t[8];
  }
  return d;
}

}  // namespace crucible::sim::climate
