#include "sim/md/lj_force.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/trace.h"

namespace crucible::sim::md {

namespace {

// Below this many atoms per thread a step's force work (~0.6 us per atom on
// one core) is too short to pay for an OpenMP fork and barrier on a loaded
// machine (measured here: 4000 atoms on 2 busy cores ran 5x slower with 2
// threads than with 1).
constexpr int kMinAtomsPerThread = 8000;

// Owned atoms [i0, i1) against their half lists; fx/fy/fz may be a thread's
// private copy (length nall). Written for the vectoriser: in-order sums do
// not vectorise (no -ffast-math), so each neighbour chunk is summed in kLanes
// independent lanes -- a fixed reassociation, the same on every run -- and
// the force factors are kept in a buffer; the reactions on the neighbours
// are scattered in a second, scalar pass.
constexpr int kLanes = 8;

template <bool kEnergy>
inline __attribute__((always_inline)) void half_range_body(
    int i0, int i1, const int* __restrict start, const int* __restrict nbr,
    const double* __restrict x, const double* __restrict y, const double* __restrict z,
    double* __restrict fx, double* __restrict fy, double* __restrict fz, double rc2, double* pe_out,
    double* w_out) {
  double pe = 0, w = 0;
  constexpr int kChunk = 512;
  alignas(64) double fpair[kChunk];
  for (int i = i0; i < i1; ++i) {
    const double xi = x[i], yi = y[i], zi = z[i];
    alignas(64) double fxl[kLanes] = {}, fyl[kLanes] = {}, fzl[kLanes] = {}, pel[kLanes] = {},
                       wl[kLanes] = {};
    for (int k0 = start[i]; k0 < start[i + 1]; k0 += kChunk) {
      const int n = std::min(kChunk, start[i + 1] - k0);
      const int* __restrict js = nbr + k0;
      const int whole = n - n % kLanes;
      for (int k = 0; k < whole; k += kLanes) {
        for (int l = 0; l < kLanes; ++l) {
          const int j = js[k + l];
          const double dx = xi - x[j], dy = yi - y[j], dz = zi - z[j];
          const double r2 = dx * dx + dy * dy + dz * dz;
          const double r2i = 1.0 / r2, r6i = r2i * r2i * r2i;
          const double in = r2 < rc2 ? 1.0 : 0.0;  // a mask, not a branch
          const double f = in * 48.0 * r6i * (r6i - 0.5) * r2i;
          fpair[k + l] = f;
          fxl[l] += dx * f, fyl[l] += dy * f, fzl[l] += dz * f;
          if constexpr (kEnergy) {
            pel[l] += in * 4.0 * r6i * (r6i - 1.0);
            wl[l] += r2 * f;
          }
        }
      }
      for (int k = whole; k < n; ++k) {  // the remainder, into lane 0
        const int j = js[k];
        const double dx = xi - x[j], dy = yi - y[j], dz = zi - z[j];
        const double r2 = dx * dx + dy * dy + dz * dz;
        const double r2i = 1.0 / r2, r6i = r2i * r2i * r2i;
        const double in = r2 < rc2 ? 1.0 : 0.0;
        const double f = in * 48.0 * r6i * (r6i - 0.5) * r2i;
        fpair[k] = f;
        fxl[0] += dx * f, fyl[0] += dy * f, fzl[0] += dz * f;
        if constexpr (kEnergy) {
          pel[0] += in * 4.0 * r6i * (r6i - 1.0);
          wl[0] += r2 * f;
        }
      }
      for (int k = 0; k < n; ++k) {
        const int j = js[k];
        const double f = fpair[k];
        fx[j] -= (xi - x[j]) * f, fy[j] -= (yi - y[j]) * f, fz[j] -= (zi - z[j]) * f;
      }
    }
    double fxi = 0, fyi = 0, fzi = 0;
    for (int l = 0; l < kLanes; ++l) {
      fxi += fxl[l], fyi += fyl[l], fzi += fzl[l];
      if constexpr (kEnergy) pe += pel[l], w += wl[l];
    }
    fx[i] += fxi, fy[i] += fyi, fz[i] += fzi;
  }
  *pe_out = pe, *w_out = w;
}

// The body compiled once per instruction set (clang multiversions no
// templates, so each specialisation gets a plain function of its own; the
// body is inlined into each clone and compiled for its ISA).
#define CRUCIBLE_HALF_RANGE_ARGS                                                                   \
  int i0, int i1, const int *__restrict start, const int *__restrict nbr, const double *__restrict x, \
      const double *__restrict y, const double *__restrict z, double *__restrict fx,                 \
      double *__restrict fy, double *__restrict fz, double rc2, double *pe_out, double *w_out
__attribute__((target_clones("avx512f", "avx2", "default"))) void half_range_energy(CRUCIBLE_HALF_RANGE_ARGS) {
  half_range_body<true>(i0, i1, start, nbr, x, y, z, fx, fy, fz, rc2, pe_out, w_out);
}
__attribute__((target_clones("avx512f", "avx2", "default"))) void half_range_forces(CRUCIBLE_HALF_RANGE_ARGS) {
  half_range_body<false>(i0, i1, start, nbr, x, y, z, fx, fy, fz, rc2, pe_out, w_out);
}
#undef CRUCIBLE_HALF_RANGE_ARGS

}  // namespace

LjSums lj_half(Domain& d, double cutoff, bool energy) {
  trace::Scope scope("force", "sim");
  const int nall = d.nlocal + d.nghost;
  const double rc2 = cutoff * cutoff;
  std::fill(d.fx.begin(), d.fx.begin() + nall, 0.0);
  std::fill(d.fy.begin(), d.fy.begin() + nall, 0.0);
  std::fill(d.fz.begin(), d.fz.begin() + nall, 0.0);
  auto run = energy ? half_range_energy : half_range_forces;
  const int nt = std::min(omp_get_max_threads(), std::max(1, d.nlocal / kMinAtomsPerThread));
  LjSums sums;
  if (nt == 1) {
    run(0, d.nlocal, d.nbr_start.data(), d.nbr.data(), d.x.data(), d.y.data(), d.z.data(),
        d.fx.data(), d.fy.data(), d.fz.data(), rc2, &sums.pe, &sums.virial);
    return sums;
  }
  // Private force copies per thread, summed in thread order (deterministic
  // for a given thread count).
  std::vector<double> priv(size_t(nt) * 3 * nall, 0.0), pe(nt), w(nt);
#pragma omp parallel num_threads(nt)
  {
    const int t = omp_get_thread_num();
    const int i0 = int(int64_t(d.nlocal) * t / nt), i1 = int(int64_t(d.nlocal) * (t + 1) / nt);
    double* f = priv.data() + size_t(t) * 3 * nall;
    run(i0, i1, d.nbr_start.data(), d.nbr.data(), d.x.data(), d.y.data(), d.z.data(), f, f + nall,
        f + 2 * nall, rc2, &pe[t], &w[t]);
#pragma omp barrier
#pragma omp for schedule(static)
    for (int i = 0; i < nall; ++i) {
      double sx = 0, sy = 0, sz = 0;
      for (int u = 0; u < nt; ++u) {
        const double* g = priv.data() + size_t(u) * 3 * nall;
        sx += g[i], sy += g[nall + i], sz += g[2 * nall + i];
      }
      d.fx[i] = sx, d.fy[i] = sy, d.fz[i] = sz;
    }
  }
  for (int t = 0; t < nt; ++t) sums.pe += pe[t], sums.virial += w[t];
  return sums;
}

// Atom i's force from its id-sorted full list: a function of the global ids
// and positions only, whatever the rank or thread layout. The sum is taken
// in kLanes lanes by list position (position k into lane k % kLanes), then
// the lanes in order: the same fixed order everywhere, and a loop the
// vectoriser takes.
__attribute__((target_clones("avx512f", "avx2", "default"))) static void full_range(
    int i0, int i1, const int* __restrict start, const int* __restrict nbr,
    const double* __restrict x, const double* __restrict y, const double* __restrict z,
    double* __restrict fx, double* __restrict fy, double* __restrict fz, double rc2,
    double* __restrict pe_atom, double* __restrict w_atom) {
  for (int i = i0; i < i1; ++i) {
    const double xi = x[i], yi = y[i], zi = z[i];
    alignas(64) double fxl[kLanes] = {}, fyl[kLanes] = {}, fzl[kLanes] = {}, pel[kLanes] = {},
                       wl[kLanes] = {};
    const int k0 = start[i], n = start[i + 1] - k0;
    const int* __restrict js = nbr + k0;
    // Position k goes to lane k % kLanes (the tail too).
    for (int k = 0; k < n; k += kLanes) {
      const int m = std::min(kLanes, n - k);
      if (m == kLanes) {
        for (int l = 0; l < kLanes; ++l) {
          const int j = js[k + l];
          const double dx = xi - x[j], dy = yi - y[j], dz = zi - z[j];
          const double r2 = dx * dx + dy * dy + dz * dz;
          const double r2i = 1.0 / r2, r6i = r2i * r2i * r2i;
          const double in = r2 < rc2 ? 1.0 : 0.0;  // a mask, not a branch
          const double f = in * 48.0 * r6i * (r6i - 0.5) * r2i;
          fxl[l] += dx * f, fyl[l] += dy * f, fzl[l] += dz * f;
          pel[l] += in * 4.0 * r6i * (r6i - 1.0);
          wl[l] += r2 * f;
        }
        continue;
      }
      for (int l = 0; l < m; ++l) {
        const int j = js[k + l];
        const double dx = xi - x[j], dy = yi - y[j], dz = zi - z[j];
        const double r2 = dx * dx + dy * dy + dz * dz;
        const double r2i = 1.0 / r2, r6i = r2i * r2i * r2i;
        const double in = r2 < rc2 ? 1.0 : 0.0;
        const double f = in * 48.0 * r6i * (r6i - 0.5) * r2i;
        fxl[l] += dx * f, fyl[l] += dy * f, fzl[l] += dz * f;
        pel[l] += in * 4.0 * r6i * (r6i - 1.0);
        wl[l] += r2 * f;
      }
    }
    double fxi = 0, fyi = 0, fzi = 0, pe = 0, w = 0;
    for (int l = 0; l < kLanes; ++l)
      fxi += fxl[l], fyi += fyl[l], fzi += fzl[l], pe += pel[l], w += wl[l];
    fx[i] = fxi, fy[i] = fyi, fz[i] = fzi;
    if (pe_atom) pe_atom[i] = 0.5 * pe, w_atom[i] = 0.5 * w;
  }
}

void lj_full_sorted(Domain& d, double cutoff, bool energy, ExactSum* pe_sum, ExactSum* w_sum) {
  trace::Scope scope("force", "sim");
  const double rc2 = cutoff * cutoff;
  const int n = d.nlocal;
  std::vector<double> pe_atom(energy ? n : 0), w_atom(energy ? n : 0);
  const int nt = std::min(omp_get_max_threads(), std::max(1, n / kMinAtomsPerThread));
  // Each atom writes only its own force: threads need no private copies.
#pragma omp parallel num_threads(nt)
  {
    const int t = omp_get_thread_num();
    const int i0 = int(int64_t(n) * t / nt), i1 = int(int64_t(n) * (t + 1) / nt);
    full_range(i0, i1, d.nbr_start.data(), d.nbr.data(), d.x.data(), d.y.data(), d.z.data(),
               d.fx.data(), d.fy.data(), d.fz.data(), rc2, energy ? pe_atom.data() : nullptr,
               energy ? w_atom.data() : nullptr);
  }
  if (energy)
    for (int i = 0; i < n; ++i) pe_sum->add(pe_atom[i]), w_sum->add(w_atom[i]);
}

double lj_tail_energy(double rho, double rc) {
  const double r3 = 1.0 / (rc * rc * rc), r9 = r3 * r3 * r3;
  return 8.0 / 3.0 * M_PI * rho * (r9 / 3.0 - r3);
}

double lj_tail_pressure(double rho, double rc) {
  const double r3 = 1.0 / (rc * rc * rc), r9 = r3 * r3 * r3;
  return 16.0 / 3.0 * M_PI * rho * rho * (2.0 / 3.0 * r9 - r3);
}

}  // namespace crucible::sim::md
