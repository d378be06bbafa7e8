// MdConfig: the keys of `crucible sim md` (section [md] of configs/sim/md.toml),
// all in reduced Lennard-Jones units (sigma = epsilon = m = k_B = 1; time in
// sigma*sqrt(m/epsilon)). md_fields binds "md.<key>" to the members (the
// driver parses TOML and --set through them); validate_md refuses values no
// simulation can take, naming the key. Plain data; not thread-safe.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/config_field.h"
#include "core/status.h"

namespace crucible::sim {

struct MdConfig {
  int cells = 10;               // FCC unit cells per box edge: N = 4 * cells^3 atoms
  double density = 0.8;         // rho* = N sigma^3 / V
  double temperature = 2.0;     // T* of the initial velocities and of the thermostat
  double dt = 0.005;            // time step, tau = sigma sqrt(m/epsilon)
  int64_t steps = 6000;         // time steps in the whole run (equilibration included)
  int64_t equil_steps = 1000;   // first steps under the Berendsen thermostat; NVE after
  double thermostat_tau = 0.1;  // Berendsen coupling time (tau); used while step <= equil_steps
  double cutoff = 2.5;          // r_c (sigma): LJ pairs beyond it are dropped, tail-corrected
  double skin = 0.3;            // Verlet-list skin (sigma): lists hold pairs within r_c + skin
  int neighbor_every = 0;  // 0: rebuild when an atom moved > skin/2; n > 0: every n steps, no check
  int thermo_every = 10;   // steps between energy/pressure samples (metrics, averages, checks)
  int dump_every = 500;    // steps between XYZ frames in RUN/md_traj.xyz; 0: no trajectory
  bool reproducible =
      false;  // true: identical results on any rank count (full lists, fixed-point sums)
  std::string start_file;  // extended XYZ to start from ("": FCC lattice); N and the box then
                           // come from the file and md.cells / md.density are not used
  double max_energy_jump =
      1.0;  // |dE/N| per step (epsilon, averaged between samples) that stops the run
};

std::vector<config::Field> md_fields(MdConfig& c);
Status validate_md(const MdConfig& c);

// Derived sizes, shared by validation and the workload.
inline int64_t md_atom_count(const MdConfig& c) { return int64_t(4) * c.cells * c.cells * c.cells; }
double md_box_length(const MdConfig& c);  // L = (N / rho)^(1/3)

}  // namespace crucible::sim
