// `crucible sim climate`: the shallow-water equations on the sphere
// (docs/sim/climate.md), run as a sim::Workload over the ranks of a Comm,
// each rank a band of latitude rows (climate/swe_solver.h).
//
// A step is one RK4 time step. The fields are bit-identical over 1, 2 and 4
// ranks and any thread count, and so are the diagnostics (row sums added in
// row order). State (checkpoints): h, u, v whole, the snapshots kept so far
// for climate.nc, the initial and latest diagnostics and the largest drifts
// seen; a resumed run continues bit for bit. finish() writes RUN/climate.nc
// (CF-1.8, rank 0, atomically) and returns the summary with the report's maps.
#pragma once
#include <memory>

#include "comm/comm.h"
#include "core/status.h"
#include "sim/climate/climate_config.h"
#include "sim/workload.h"

namespace crucible::sim {

// Validates c (validate_climate, the row count against comm.size(), the
// time step against the CFL limit of the initial state, the snapshots'
// memory) and returns one Status::invalid line naming the key on a bad
// one; nothing is written. seed is unused: the model is deterministic.
// Collective only in that every rank must call it (no communication).
Result<std::unique_ptr<Workload>> make_climate_workload(const ClimateConfig& c, comm::Comm& comm,
                                                        uint64_t seed);

}  // namespace crucible::sim
