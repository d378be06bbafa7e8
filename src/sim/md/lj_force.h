// Lennard-Jones forces over a Domain's Verlet lists, in reduced units:
//   u(r) = 4 (r^-12 - r^-6) for r < r_c (truncated, not shifted),
//   f(r) r = 48 r^-12 - 24 r^-6; virial W = sum over pairs of r . f.
// Two kernels, one per mode:
//  - lj_half: the half list with Newton's third law (each pair once, forces
//    on ghosts sent back by Domain::reverse_forces); OpenMP threads write
//    private force copies that are summed in thread order. Fast; the result
//    depends in its last bits on the rank and thread count.
//  - lj_full_sorted: the full list, neighbours in global-id order, each atom
//    writing only its own force, and per-atom energy/virial summed exactly
//    (ExactSum): the same bits on any rank and thread count.
// Both return this rank's share of the potential energy and virial (energy
// false: zeros, and the kernel skips that arithmetic). Tail corrections
// for the truncated potential (Allen & Tildesley, Computer Simulation of Liquids) are added by
// the caller: lj_tail_energy / lj_tail_pressure.
#pragma once
#include "sim/md/domain.h"
#include "sim/md/exact_sum.h"

namespace crucible::sim::md {

struct LjSums {
  double pe = 0;      // sum of u over pairs (this rank's share)
  double virial = 0;  // sum of r . f over pairs (this rank's share)
};

// f := LJ forces on owned atoms (ghost forces: partial sums to send back).
LjSums lj_half(Domain& d, double cutoff, bool energy);
// f := LJ forces on owned atoms; pe and virial as exact sums of per-atom halves.
void lj_full_sorted(Domain& d, double cutoff, bool energy, ExactSum* pe, ExactSum* virial);

// Per atom, for a homogeneous fluid beyond r_c: U_tail/N and P_tail.
double lj_tail_energy(double density, double cutoff);
double lj_tail_pressure(double density, double cutoff);

}  // namespace crucible::sim::md
