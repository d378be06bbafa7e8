// The initial states of Williamson et al. (1992), "A standard test set for
// numerical approximations to the shallow water equations in spherical
// geometry", J. Comput. Phys. 102, 211-224: case 2 (global steady state
// nonlinear zonal geostrophic flow, rotated by alpha; its initial state is
// its exact solution at all times), case 5 (zonal flow over an isolated
// mountain) and case 6 (Rossby-Haurwitz wave, wavenumber R = 4).
//
// Point values at (lambda, phi) in radians. h is the fluid depth (m), hs the
// surface (mountain) height (m; 0 except case 5), so h + hs is the free
// surface; u, v the eastward and northward velocity (m/s); f the Coriolis
// parameter (1/s; case 2 rotates it with the flow). Pure functions;
// thread-safe.
#pragma once

namespace crucible::sim::climate {

struct PointState {
  double h = 0, u = 0, v = 0;
};

class Williamson {
 public:
  Williamson(int test_case, double alpha_rad) : case_(test_case), alpha_(alpha_rad) {}
  int test_case() const { return case_; }
  PointState initial(double lambda, double phi) const;
  double surface(double lambda, double phi) const;
  double coriolis(double lambda, double phi) const;
  // True when f depends on latitude only (every case but case 2 with alpha != 0).
  bool zonal_coriolis() const { return case_ != 2 || alpha_ == 0.0; }
  // The exact h at any time, where one is known (case 2: the initial state).
  bool has_exact_solution() const { return case_ == 2; }
  const char* title() const;

 private:
  int case_;
  double alpha_;
};

}  // namespace crucible::sim::climate
