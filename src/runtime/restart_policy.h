// How the supervisor continues after a failed attempt: how long it waits,
// and on how many ranks it relaunches (docs/fault_tolerance.md, "Elastic
// fallback"). Pure functions, unit-tested.
#pragma once

namespace crucible::runtime {

// The wait before restart number `restart` (1-based): `base`, doubling, at most 60 s.
double restart_backoff_s(int restart, double base);

// The largest world in [min_ranks, cap] that keeps the global batch
// (`total` = world x grad_accum micro-batches) whole: it divides total, and
// in reproducible mode both it and total / it are powers of two (the
// reduction tree's shape). 0 when there is none.
int shrunk_world(int total, int min_ranks, int cap, bool reproducible);

}  // namespace crucible::runtime
