// md::initial_atoms: the md workload's start, every atom in id order,
// computed alike on every rank (so the start does not depend on the rank
// count): positions on an FCC lattice of `cells`^3 unit cells filling the box
// (4 atoms per cell, id = 4 * cell + basis, cell = (k * cells + j) * cells + i)
// or the given positions; velocities three N(0, 1) draws of Rng(seed, id),
// then the centre-of-mass velocity removed and all scaled so that
// T = 2 KE / (3N - 3) is `temperature` exactly (reduced units, m = 1).
// Pure function.
#pragma once
#include <cstdint>
#include <vector>

namespace crucible::sim::md {

struct InitialAtoms {
  std::vector<double> pos;  // (N, 3)
  std::vector<double> vel;  // (N, 3)
};

// given_pos: (N, 3) positions to use instead of the lattice, or empty.
InitialAtoms initial_atoms(int cells, double box, int64_t n, const std::vector<double>& given_pos,
                           uint64_t seed, double temperature);

}  // namespace crucible::sim::md
