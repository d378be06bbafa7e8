// md::read_xyz_start: a starting configuration for the md workload from an
// extended XYZ file (what the workload itself writes: md_final.xyz, a frame
// of md_traj.xyz, or ASE/OVITO output): the atom count, a comment line with
// a cubic Lattice="L 0 0 0 L 0 0 0 L", then one "species x y z ..." line per
// atom (extra columns ignored). Positions are wrapped into [0, L).
// Refused with one "[config] md.start_file PATH: ..." line: unreadable or
// malformed files, a non-cubic or missing lattice, non-finite positions, and
// two atoms closer than kMinStartDistance (overlapping atoms). Pure function.
#pragma once
#include <string>
#include <vector>

#include "core/status.h"

namespace crucible::sim::md {

inline constexpr double kMinStartDistance = 0.5;  // sigma

struct StartConfig {
  double box = 0;           // L (sigma)
  std::vector<double> pos;  // (N, 3), wrapped into [0, L)
};

Result<StartConfig> read_xyz_start(const std::string& path);

// The smallest pair distance under periodic boundaries (cell lists; O(N)),
// with the two atoms' indices. For N < 2: +inf.
double min_pair_distance(const std::vector<double>& pos, double box, int64_t* a, int64_t* b);

}  // namespace crucible::sim::md
