// SweSolver: one rank's latitude band of the shallow-water equations on the
// sphere, advanced by classical RK4, with its halo exchange through Comm.
//
// Equations (vector-invariant momentum, flux-form mass), on an unstaggered
// (Arakawa A) latitude-longitude grid, second-order centred differences:
//   dh/dt = -div(h v)                                  finite volume: face fluxes
//   du/dt =  (f + zeta) v - 1/(a cos phi) dB/dlambda   B = g (h + hs) + |v|^2 / 2
//   dv/dt = -(f + zeta) u - 1/a dB/dphi            (the mass divergence's adjoint, below)
//   zeta  = 1/(a cos phi) (dv/dlambda - d(u cos phi)/dphi)
// The meridional gradient in dv/dt weights the north and south one-sided
// differences by the lengths of the faces between them, which makes it the
// negative adjoint of the flux-form divergence (area-weighted), so the
// linear gravity-wave terms exchange energy exactly. Inside it is centred to
// O(dlat^2); in a polar row it is one-sided, since no mass crosses the pole
// either. A centred difference across the pole (momentum feeling pressure
// that mass cannot answer) grew a meridional 2-dy mode in v near the poles
// and ended case 6 after ~9 days, at every resolution tried.
// Optionally (climate.damping_time_h) a grid-scale damping of the momentum,
// r (delta_i^2 + delta_j^2) u (and v): the 5-point second difference in
// index space, of the components continued over the pole, at rate
// r = 1 / (8 tau), so the checkerboard decays as exp(-t / tau); in index
// space it is not stiff near the poles, and on smooth fields it is
// nu d^2/dx^2 with nu = (a dlat)^2 / (8 tau), shrinking with the grid
// squared. Off by default: the scheme is stable without it.
// The polar filter (polar_filter.h) acts on the dynamics' tendency whole in
// the rows poleward of the filter latitude (filtering the zonal terms alone
// broke the balance of the large zonal and meridional terms near a pole in
// a flow over the pole); the damping is not filtered.
//
// Storage: each field is (rows + 2) x (nlon + 2) doubles: local row jl in
// [-1, rows] (jl = -1 and rows are halo rows), column i in [-1, nlon] (the
// ghost columns repeat columns nlon-1 and 0: the grid is periodic). A halo
// row beyond a pole is the band's own polar row turned by 180 degrees, with u
// and v negated (the coordinate continued over the pole: phi -> -pi - phi);
// other halo rows come from the neighbouring ranks. Rank r holds the r-th
// band of split_rows (south to north), weighted by each row's cost: a
// filtered row counts kFilteredRowCost unfiltered ones, so the polar bands
// are narrower and 4 ranks share the filter's work.
//
// Determinism: every cell's update reads the same operands in the same order
// whatever the band or thread count, so the fields are bit-identical over
// 1, 2 and 4 ranks and any OMP_NUM_THREADS. Threading: OpenMP over the rows
// of a stage. Thread-compatible: one thread calls it (collectively with the
// other ranks for step() and exchange()).
#pragma once
#include <cstdint>
#include <vector>

#include "comm/comm.h"
#include "core/status.h"
#include "sim/climate/grid.h"
#include "sim/climate/polar_filter.h"
#include "sim/climate/williamson.h"

namespace crucible::sim::climate {

struct Fields {
  std::vector<double> h, u, v;  // each (rows + 2) x (nlon + 2)
};

// What a row's stencil needs of its geometry (global row j).
struct RowGeom {
  double cos_s = 0, cos_n = 0;  // cos of the centres of rows j-1, j+1 (continued over a pole: < 0)
  double inv_acos = 0;          // 1 / (a cos phi_j), 1/m
  double len_s = 0, len_n = 0;  // a cos(edge) dlon: lengths of the south and north faces, m
  double len_ew = 0;            // a dlat: length of the east and west faces, m
  double inv_area = 0;          // 1 / cell area, 1/m^2
  double f = 0;                 // Coriolis parameter when it is zonal, 1/s
  double damp = 0;              // grid-scale damping rate r, 1/s
  double grad_n = 0,
         grad_s = 0;  // meridional gradient weights of the north and south differences, 1/m
};

// The geometry of every row (nlat), with grid-scale damping rate r (1/s).
std::vector<RowGeom> row_geometry(const Grid& grid, const Williamson& wcase, double damping_rate);

class SweSolver {
 public:
  // Measured (bench/sim_climate_bench): a filtered row costs ~15 unfiltered
  // ones (14.6 at nlat 96 by convolution, 15.8 at nlat 360 by FFT).
  static constexpr double kFilteredRowCost = 15.0;

  // This rank's band is bands()[comm.rank()].
  SweSolver(const Grid& grid, const Williamson& wcase, double filter_lat_deg, double damping_rate,
            comm::Comm& comm);

  // Fields := the case's initial state (every rank: its band).
  void set_initial();
  // One RK4 step of dt seconds. Collective (halo exchanges).
  Status step(double dt);
  // Fills the halo rows and ghost columns of y0 (a no-op when already fresh).
  // Collective.
  Status refresh_halos();

  // Field access: local row jl in [-1, rows], column i in [-1, nlon].
  int rows() const { return band_.rows(); }
  int nlon() const { return grid_.nlon; }
  int stride() const { return grid_.nlon + 2; }
  size_t at(int jl, int i) const { return size_t(jl + 1) * stride() + size_t(i + 1); }
  const Fields& fields() const { return y0_; }
  // Replaces the interior of the band from whole-grid arrays (nlat x nlon,
  // row-major, south to north) and marks the halos stale.
  void set_fields(const std::vector<double>& h, const std::vector<double>& u,
                  const std::vector<double>& v);
  // The band's interior rows, packed [field h,u,v][row][i].
  std::vector<double> pack_band() const;
  // Collective: the whole grid's fields on rank 0, (3 [h u v], nlat, nlon);
  // empty on the other ranks.
  Result<std::vector<double>> gather() const;

  const Grid& grid() const { return grid_; }
  Band band() const { return band_; }
  const std::vector<Band>& bands() const { return bands_; }  // every rank's, in rank order
  const Williamson& wcase() const { return wcase_; }
  const PolarFilter& filter() const { return filter_; }
  const RowGeom& geom(int j) const { return geom_[j]; }
  // Coriolis parameter at local (jl, i) and surface height (0 without a mountain).
  double coriolis(int jl, int i) const;
  double surface(int jl, int i) const { return hs_.empty() ? 0.0 : hs_[at(jl, i)]; }
  // Bytes one step reads and writes from memory, counted as STREAM counts
  // (each array element read or written once per stage; the neighbour rows
  // come from cache): the figure the bandwidth benchmark divides by.
  double bytes_per_step() const;

 private:
  enum class Stage { kFirst, kMiddle, kLast };
  Status exchange(Fields& y);
  void fill_polar_halo(Fields& y, int jl_src, int jl_dst);
  void stage(const Fields& in, Stage kind, double b, double c, Fields* out);

  const Grid& grid_;
  Williamson wcase_;
  PolarFilter filter_;
  comm::Comm& comm_;
  std::vector<Band> bands_;
  Band band_;
  std::vector<RowGeom> geom_;        // (nlat), global rows
  std::vector<double> f2d_;          // padded, when f is not zonal (case 2, alpha != 0)
  std::vector<double> hs_;           // padded, when there is a mountain (case 5)
  Fields y0_, ya_, yb_, acc_;        // RK4: the state, two stage states, the accumulated result
  std::vector<double> send_, recv_;  // halo messages: [south, north] x 3 fields x stride
  std::vector<double> scratch_;  // per thread: 5 tendency rows (dynamics, damping), the filter's
  bool fresh_ = false;           // y0's halos match its interior
};

}  // namespace crucible::sim::climate
