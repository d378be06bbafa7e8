#include "sim/climate/swe_solver.h"

#include <omp.h>

#include <cmath>
#include <cstring>

#include "core/trace.h"

namespace crucible::sim::climate {

namespace {

// The rows one cell's stencil reads: south (jl-1), centre, north (jl+1),
// each pointing at column 0 of a padded row ([-1] and [n] are valid).
struct Stencil {
  const double *hS, *hC, *hN, *uS, *uC, *uN, *vS, *vC, *vN;
  const double *sS, *sC, *sN;  // surface height rows (kHs only)
  const double* f;             // Coriolis row (kF2d only)
};

// The tendencies of one row (see the equations in swe_solver.h), in two
// parts: z* (n doubles each) the dynamics -- what the polar filter acts on,
// whole, since near a pole its zonal and meridional terms are large and
// cancel -- and, with damping (kDamp), ru and rv, the grid-scale damping of
// the momentum, which stays unfiltered so that it reaches the short waves
// near the poles too. Face fluxes are written so that the two cells of a
// face compute them from the same operands in the same order.
template <bool kF2d, bool kHs, bool kDamp>
[[gnu::always_inline]] inline void row_tendency_body(const Stencil& p, const RowGeom& rg,
                                                     double dlon, double dlat, int n,
                                                     double* __restrict zh, double* __restrict zu,
                                                     double* __restrict zv, double* __restrict ru,
                                                     double* __restrict rv) {
  const double g = kGravity;
  const double inv_2dlon = 0.5 / dlon, inv_2dlat = 0.5 / dlat;
  const double inv_2acos_dlon = rg.inv_acos * inv_2dlon;  // 1 / (2 a cos(phi) dlon)
  const double* __restrict hS = p.hS, * __restrict hC = p.hC, * __restrict hN = p.hN;
  const double* __restrict uS = p.uS, * __restrict uC = p.uC, * __restrict uN = p.uN;
  const double* __restrict vS = p.vS, * __restrict vC = p.vC, * __restrict vN = p.vN;
  for (int i = 0; i < n; ++i) {
    const double h = hC[i], u = uC[i], v = vC[i];
    const double hE = hC[i + 1], uE = uC[i + 1], vE = vC[i + 1];
    const double hW = hC[i - 1], uW = uC[i - 1], vW = vC[i - 1];
    const double hn = hN[i], un = uN[i], vn = vN[i];
    const double hs = hS[i], us = uS[i], vs = vS[i];
    // Mass: fluxes through the four faces (m^2/s) times their lengths.
    const double fe = 0.5 * (h * u + hE * uE), fw = 0.5 * (hW * uW + h * u);
    const double gn = 0.5 * (h * v + hn * vn), gs = 0.5 * (hs * vs + h * v);
    zh[i] = -((fe - fw) * rg.len_ew + (gn * rg.len_n - gs * rg.len_s)) * rg.inv_area;
    // Momentum: absolute vorticity and the gradient of B = g (h + hs) + K.
    const double zeta =
        ((vE - vW) * inv_2dlon - (un * rg.cos_n - us * rg.cos_s) * inv_2dlat) * rg.inv_acos;
    const double fa = (kF2d ? p.f[i] : rg.f) + zeta;
    const double sE = kHs ? p.sC[i + 1] : 0.0, sW = kHs ? p.sC[i - 1] : 0.0;
    const double sN = kHs ? p.sN[i] : 0.0, sS = kHs ? p.sS[i] : 0.0;
    const double bE = g * (hE + sE) + 0.5 * (uE * uE + vE * vE);
    const double bW = g * (hW + sW) + 0.5 * (uW * uW + vW * vW);
    const double bN = g * (hn + sN) + 0.5 * (un * un + vn * vn);
    const double bS = g * (hs + sS) + 0.5 * (us * us + vs * vs);
    zu[i] = fa * v - (bE - bW) * inv_2acos_dlon;
    const double bC = g * (h + (kHs ? p.sC[i] : 0.0)) + 0.5 * (u * u + v * v);
    zv[i] = -fa * u - (rg.grad_n * (bN - bC) + rg.grad_s * (bC - bS));
    if (kDamp) {
      // Second differences in index space, of u and v in the coordinate
      // continued over the pole.
      ru[i] = rg.damp * (uE + uW + un + us - 4 * u);
      rv[i] = rg.damp * (vE + vW + vn + vs - 4 * v);
    }
  }
}

// One clone per instruction set; the branches on (f2d, hs, damping) are
// outside the loop. t: 5 rows of n (zh zu zv ru rv; ru rv only with damping).
__attribute__((target_clones("avx512f", "avx2", "default"))) void row_tendency(
    const Stencil& p, const RowGeom& rg, double dlon, double dlat, int n, double* t) {
  double *zh = t, *zu = t + n, *zv = t + 2 * n, *ru = t + 3 * n, *rv = t + 4 * n;
  const bool f2d = p.f, hs = p.sC, damp = rg.damp != 0.0;
#define CRUCIBLE_ROW(a, b, c)           \
  if (f2d == a && hs == b && damp == c) \
    return row_tendency_body<a, b, c>(p, rg, dlon, dlat, n, zh, zu, zv, ru, rv);
  CRUCIBLE_ROW(false, false, false)
  CRUCIBLE_ROW(true, false, false)
  CRUCIBLE_ROW(false, true, false)
  CRUCIBLE_ROW(true, true, false)
  CRUCIBLE_ROW(false, false, true)
  CRUCIBLE_ROW(true, false, true)
  CRUCIBLE_ROW(false, true, true)
  CRUCIBLE_ROW(true, true, true)
#undef CRUCIBLE_ROW
}

// RK4 bookkeeping of one row of one field, k = kz (+ kr: the damping, when
// kSum); see SweSolver::step.
//   first:  acc = y0 + b k;  out = y0 + c k     (in == y0)
//   middle: acc += b k;      out = y0 + c k
//   last:   y0 = acc + b k
template <bool kSum>
[[gnu::always_inline]] inline void row_update_body(int kind, int n, const double* __restrict kz,
                                                   const double* __restrict kr, double b, double c,
                                                   double* __restrict y0, double* __restrict acc,
                                                   double* __restrict out) {
  if (kind == 0) {
    for (int i = 0; i < n; ++i) {
      const double k = kSum ? kz[i] + kr[i] : kz[i];
      acc[i] = y0[i] + b * k;
      out[i] = y0[i] + c * k;
    }
  } else if (kind == 1) {
    for (int i = 0; i < n; ++i) {
      const double k = kSum ? kz[i] + kr[i] : kz[i];
      acc[i] += b * k;
      out[i] = y0[i] + c * k;
    }
  } else {
    for (int i = 0; i < n; ++i) y0[i] = acc[i] + b * (kSum ? kz[i] + kr[i] : kz[i]);
  }
  double* written = kind == 2 ? y0 : out;
  written[-1] = written[n - 1];
  written[n] = written[0];
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void row_update(
    int kind, int n, const double* kz, const double* kr, double b, double c, double* y0,
    double* acc, double* out) {
  if (kr) return row_update_body<true>(kind, n, kz, kr, b, c, y0, acc, out);
  return row_update_body<false>(kind, n, kz, nullptr, b, c, y0, acc, out);
}

constexpr int kTagNorthward = 3501, kTagSouthward = 3502;

}  // namespace

std::vector<RowGeom> row_geometry(const Grid& grid, const Williamson& wcase, double damping_rate) {
  std::vector<RowGeom> geom(grid.nlat);
  const double a = kRadius, dl = grid.dlon, dp = grid.dlat;
  for (int j = 0; j < grid.nlat; ++j) {
    RowGeom& r = geom[j];
    const double c = grid.cos_lat[j];
    r.cos_s = std::cos(-kPi / 2 + (j - 0.5) * dp);  // continued over the pole: < 0 at j = 0
    r.cos_n = std::cos(-kPi / 2 + (j + 1.5) * dp);
    r.inv_acos = 1.0 / (a * c);
    r.len_s = a * grid.cos_edge[j] * dl;
    r.len_n = a * grid.cos_edge[j + 1] * dl;
    r.len_ew = a * dp;
    r.inv_area = 1.0 / grid.area[j];
    r.f = wcase.coriolis(0.0, grid.lat[j]);
    r.damp = damping_rate;
    // The meridional gradient as the mass divergence's adjoint: the two
    // one-sided differences weighted by their faces' lengths (centred but
    // for O(dlat^2) inside, one-sided at a polar row, whose pole face
    // carries no mass either).
    const double ce = grid.cos_edge[j] + grid.cos_edge[j + 1];
    r.grad_n = grid.cos_edge[j + 1] / (ce * a * dp);
    r.grad_s = grid.cos_edge[j] / (ce * a * dp);
  }
  return geom;
}

SweSolver::SweSolver(const Grid& grid, const Williamson& wcase, double filter_lat_deg,
                     double damping_rate, comm::Comm& comm)
    : grid_(grid), wcase_(wcase), filter_(grid, filter_lat_deg), comm_(comm) {
  std::vector<double> cost(grid.nlat);
  for (int j = 0; j < grid.nlat; ++j) cost[j] = filter_.filtered(j) ? kFilteredRowCost : 1.0;
  bands_ = split_rows(cost, comm.size());
  band_ = bands_[comm.rank()];
  geom_ = row_geometry(grid, wcase, damping_rate);
  const size_t size = size_t(rows() + 2) * stride();
  for (Fields* y : {&y0_, &ya_, &yb_, &acc_}) {
    y->h.assign(size, 0.0);
    y->u.assign(size, 0.0);
    y->v.assign(size, 0.0);
  }
  send_.assign(size_t(6) * stride(), 0.0);
  recv_.assign(size_t(6) * stride(), 0.0);
  if (!wcase.zonal_coriolis()) {
    f2d_.assign(size, 0.0);
    for (int jl = 0; jl < rows(); ++jl)
      for (int i = 0; i < nlon(); ++i)
        f2d_[at(jl, i)] = wcase.coriolis(grid.lon[i], grid.lat[band_.j0 + jl]);
  }
  if (wcase.test_case() == 5) {
    // Every row a stencil reads, halo rows included: beyond a pole, the
    // polar row turned by 180 degrees (hs is a scalar: no sign change).
    hs_.assign(size, 0.0);
    for (int jl = -1; jl <= rows(); ++jl) {
      int j = band_.j0 + jl, shift = 0;
      if (j < 0) j = 0, shift = nlon() / 2;
      if (j >= grid.nlat) j = grid.nlat - 1, shift = nlon() / 2;
      for (int i = -1; i <= nlon(); ++i) {
        const int src = ((i + shift) % nlon() + nlon()) % nlon();
        hs_[at(jl, i)] = wcase.surface(grid.lon[src], grid.lat[j]);
      }
    }
  }
}

double SweSolver::coriolis(int jl, int i) const {
  return f2d_.empty() ? geom_[band_.j0 + jl].f : f2d_[at(jl, i)];
}

void SweSolver::set_initial() {
  for (int jl = 0; jl < rows(); ++jl) {
    for (int i = 0; i < nlon(); ++i) {
      const PointState p = wcase_.initial(grid_.lon[i], grid_.lat[band_.j0 + jl]);
      y0_.h[at(jl, i)] = p.h;
      y0_.u[at(jl, i)] = p.u;
      y0_.v[at(jl, i)] = p.v;
    }
    for (std::vector<double>* f : {&y0_.h, &y0_.u, &y0_.v}) {
      (*f)[at(jl, -1)] = (*f)[at(jl, nlon() - 1)];
      (*f)[at(jl, nlon())] = (*f)[at(jl, 0)];
    }
  }
  fresh_ = false;
}

void SweSolver::set_fields(const std::vector<double>& h, const std::vector<double>& u,
                           const std::vector<double>& v) {
  const int n = nlon();
  for (int jl = 0; jl < rows(); ++jl) {
    const size_t src = size_t(band_.j0 + jl) * n;
    std::memcpy(&y0_.h[at(jl, 0)], &h[src], n * sizeof(double));
    std::memcpy(&y0_.u[at(jl, 0)], &u[src], n * sizeof(double));
    std::memcpy(&y0_.v[at(jl, 0)], &v[src], n * sizeof(double));
    for (std::vector<double>* f : {&y0_.h, &y0_.u, &y0_.v}) {
      (*f)[at(jl, -1)] = (*f)[at(jl, n - 1)];
      (*f)[at(jl, n)] = (*f)[at(jl, 0)];
    }
  }
  fresh_ = false;
}

std::vector<double> SweSolver::pack_band() const {
  const int n = nlon();
  std::vector<double> out(size_t(3) * rows() * n);
  const std::vector<double>* f[3] = {&y0_.h, &y0_.u, &y0_.v};
  for (int q = 0; q < 3; ++q)
    for (int jl = 0; jl < rows(); ++jl)
      std::memcpy(&out[(size_t(q) * rows() + jl) * n], &(*f[q])[at(jl, 0)], n * sizeof(double));
  return out;
}

Result<std::vector<double>> SweSolver::gather() const {
  constexpr int kTagGather = 3503;
  std::vector<double> mine = pack_band();
  if (comm_.rank() != 0) {
    CRUCIBLE_RETURN_IF_ERROR(comm_.send(mine.data(), mine.size() * sizeof(double), 0, kTagGather));
    return std::vector<double>();
  }
  const size_t n = nlon(), plane = size_t(grid_.nlat) * n;
  std::vector<double> whole(3 * plane);
  std::vector<double> piece;
  for (int r = 0; r < comm_.size(); ++r) {
    const Band b = bands_[r];
    const size_t rows_r = b.rows();
    if (r == 0) {
      piece.swap(mine);
    } else {
      piece.assign(3 * rows_r * n, 0.0);
      CRUCIBLE_RETURN_IF_ERROR(
          comm_.recv(piece.data(), piece.size() * sizeof(double), r, kTagGather));
    }
    for (int q = 0; q < 3; ++q)
      std::memcpy(&whole[q * plane + size_t(b.j0) * n], &piece[q * rows_r * n],
                  rows_r * n * sizeof(double));
  }
  return whole;
}

// Row jl_dst (a halo row beyond a pole) := row jl_src turned by 180 degrees,
// u and v negated (the continued coordinate's east and north point the other way).
void SweSolver::fill_polar_halo(Fields& y, int jl_src, int jl_dst) {
  const int n = nlon(), half = n / 2;
  for (int i = -1; i <= n; ++i) {
    const int src = ((i + half) % n + n) % n;
    y.h[at(jl_dst, i)] = y.h[at(jl_src, src)];
    y.u[at(jl_dst, i)] = -y.u[at(jl_src, src)];
    y.v[at(jl_dst, i)] = -y.v[at(jl_src, src)];
  }
}

Status SweSolver::exchange(Fields& y) {
  trace::Scope scope("halo_exchange", "sim");
  const int s = stride(), rank = comm_.rank();
  const bool south = band_.j0 > 0, north = band_.j1 < grid_.nlat;
  const size_t row_bytes = size_t(3) * s * sizeof(double);
  // send_/recv_: [0, 3s) the south side, [3s, 6s) the north side, h u v each.
  auto pack = [&](int jl, double* dst) {
    std::memcpy(dst, &y.h[at(jl, -1)], s * sizeof(double));
    std::memcpy(dst + s, &y.u[at(jl, -1)], s * sizeof(double));
    std::memcpy(dst + 2 * s, &y.v[at(jl, -1)], s * sizeof(double));
  };
  auto unpack = [&](const double* src, int jl) {
    std::memcpy(&y.h[at(jl, -1)], src, s * sizeof(double));
    std::memcpy(&y.u[at(jl, -1)], src + s, s * sizeof(double));
    std::memcpy(&y.v[at(jl, -1)], src + 2 * s, s * sizeof(double));
  };
  std::vector<comm::Request> reqs;
  if (south) reqs.push_back(comm_.irecv(recv_.data(), row_bytes, rank - 1, kTagNorthward));
  if (north) reqs.push_back(comm_.irecv(recv_.data() + 3 * s, row_bytes, rank + 1, kTagSouthward));
  if (south) {
    pack(0, send_.data());
    reqs.push_back(comm_.isend(send_.data(), row_bytes, rank - 1, kTagSouthward));
  }
  if (north) {
    pack(rows() - 1, send_.data() + 3 * s);
    reqs.push_back(comm_.isend(send_.data() + 3 * s, row_bytes, rank + 1, kTagNorthward));
  }
  Status first;
  for (comm::Request& r : reqs) {
    Status st = r.wait();
    if (first.is_ok() && !st.is_ok()) first = st;
  }
  if (!first.is_ok()) return first;
  if (south) unpack(recv_.data(), -1);
  if (north) unpack(recv_.data() + 3 * s, rows());
  if (!south) fill_polar_halo(y, 0, -1);
  if (!north) fill_polar_halo(y, rows() - 1, rows());
  return Status::ok();
}

Status SweSolver::refresh_halos() {
  if (fresh_) return Status::ok();
  CRUCIBLE_RETURN_IF_ERROR(exchange(y0_));
  fresh_ = true;
  return Status::ok();
}

void SweSolver::stage(const Fields& in, Stage kind, double b, double c, Fields* out) {
  trace::Scope scope("swe_stage", "sim");
  const int n = nlon();
  const size_t per_thread = size_t(5) * n + filter_.scratch_doubles();
  const int threads = omp_get_max_threads();
  if (scratch_.size() < size_t(threads) * per_thread)
    scratch_.assign(size_t(threads) * per_thread, 0.0);
  const int kind_id = kind == Stage::kFirst ? 0 : kind == Stage::kMiddle ? 1 : 2;
#pragma omp parallel
  {
    double* t = scratch_.data() + size_t(omp_get_thread_num()) * per_thread;
    double* tmp = t + 5 * n;  // t: zh zu zv ru rv (row_tendency); tmp: the filter's
#pragma omp for schedule(static)
    for (int jl = 0; jl < rows(); ++jl) {
      const int j = band_.j0 + jl;
      Stencil p{&in.h[at(jl - 1, 0)],
                &in.h[at(jl, 0)],
                &in.h[at(jl + 1, 0)],
                &in.u[at(jl - 1, 0)],
                &in.u[at(jl, 0)],
                &in.u[at(jl + 1, 0)],
                &in.v[at(jl - 1, 0)],
                &in.v[at(jl, 0)],
                &in.v[at(jl + 1, 0)],
                nullptr,
                nullptr,
                nullptr,
                nullptr};
      if (!hs_.empty())
        p.sS = &hs_[at(jl - 1, 0)], p.sC = &hs_[at(jl, 0)], p.sN = &hs_[at(jl + 1, 0)];
      if (!f2d_.empty()) p.f = &f2d_[at(jl, 0)];
      row_tendency(p, geom_[j], grid_.dlon, grid_.dlat, n, t);
      if (filter_.filtered(j)) filter_.apply(j, t, t + n, t + 2 * n, tmp);
      const size_t o = at(jl, 0);
      double* outs[3] = {out ? &out->h[o] : nullptr, out ? &out->u[o] : nullptr,
                         out ? &out->v[o] : nullptr};
      const bool damp = geom_[j].damp != 0.0;
      row_update(kind_id, n, t, nullptr, b, c, &y0_.h[o], &acc_.h[o], outs[0]);
      row_update(kind_id, n, t + n, damp ? t + 3 * n : nullptr, b, c, &y0_.u[o], &acc_.u[o],
                 outs[1]);
      row_update(kind_id, n, t + 2 * n, damp ? t + 4 * n : nullptr, b, c, &y0_.v[o], &acc_.v[o],
                 outs[2]);
    }
  }
}

// Classical RK4: k1 = L(y0), k2 = L(y0 + dt/2 k1), k3 = L(y0 + dt/2 k2),
// k4 = L(y0 + dt k3); y0 += dt/6 (k1 + 2 k2 + 2 k3 + k4), accumulated in acc
// in that order. ya and yb alternate as stage states (a stage reads the
// neighbours of its input, so it cannot write it).
Status SweSolver::step(double dt) {
  CRUCIBLE_RETURN_IF_ERROR(refresh_halos());
  stage(y0_, Stage::kFirst, dt / 6, dt / 2, &ya_);
  CRUCIBLE_RETURN_IF_ERROR(exchange(ya_));
  stage(ya_, Stage::kMiddle, dt / 3, dt / 2, &yb_);
  CRUCIBLE_RETURN_IF_ERROR(exchange(yb_));
  stage(yb_, Stage::kMiddle, dt / 3, dt, &ya_);
  CRUCIBLE_RETURN_IF_ERROR(exchange(ya_));
  stage(ya_, Stage::kLast, dt / 6, 0.0, nullptr);
  fresh_ = false;
  return Status::ok();
}

double SweSolver::bytes_per_step() const {
  // Per cell and field: first stage reads y0, writes acc and out (3 arrays);
  // middle stages read in, y0, acc and write acc, out (5); the last reads
  // in, acc and writes y0 (3): 16 per field, 48 for h, u, v. Each stage also
  // reads the padded f and hs where they exist.
  const double extra = (f2d_.empty() ? 0 : 1) + (hs_.empty() ? 0 : 1);
  return double(rows()) * nlon() * sizeof(double) * (48 + 4 * extra);
}

}  // namespace crucible::sim::climate
