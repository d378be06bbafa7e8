// `crucible sim md`: molecular dynamics of a Lennard-Jones fluid (docs/sim/md.md).
// N = 4 cells^3 atoms start on an FCC lattice at the configured density in a
// periodic cubic box, with velocities drawn from the counter RNG keyed by
// (seed, atom id); velocity Verlet, Berendsen-thermostatted for the first
// md.equil_steps steps and NVE after; Verlet lists over cell lists; slabs
// along x over the ranks of the Comm (md/domain.h). One step() is one time
// step. finish() reports the NVE averages (block errors), the energy drift and
// the Johnson-Zollweg-Gubbins equation of state at the same state point.
#pragma once
#include <cstdint>
#include <memory>

#include "comm/comm.h"
#include "core/status.h"
#include "sim/md/md_config.h"
#include "sim/workload.h"

namespace crucible::sim {

// Validates c (one Status::invalid line naming the problem) and makes the
// workload; nothing is written. The Comm must outlive the workload.
Result<std::unique_ptr<Workload>> make_md_workload(const MdConfig& c, comm::Comm& comm,
                                                   uint64_t seed);

}  // namespace crucible::sim
