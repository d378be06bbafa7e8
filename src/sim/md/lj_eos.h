// The Lennard-Jones equation of state of Johnson, Zollweg & Gubbins, Mol.
// Phys. 78, 591 (1993): a modified Benedict-Webb-Rubin form with 32 fitted
// parameters x1..x32 and gamma = 3 (their Tables 5-10), for the full
// (untruncated) LJ fluid in reduced units. The reference the md workload's
// measured pressure and potential energy are compared with. Pure functions.
#pragma once

namespace crucible::sim::md {

struct LjEosPoint {
  double pressure = 0;   // P* (ideal + residual)
  double energy = 0;     // U*/N, residual (potential) internal energy per atom
  double helmholtz = 0;  // A*/N, residual Helmholtz energy per atom
};

LjEosPoint jzg_eos(double density, double temperature);

}  // namespace crucible::sim::md
