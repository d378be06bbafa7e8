// The memory a training run needs, computed from its config before anything
// large is allocated, and the check that refuses a run that cannot fit
// (DESIGN.md: bad input is one line and exit 2, never an abort mid-run).
// The model is the planner's (plan/memory_model.h) for the run's own layout
// (runtime/plan_run.h), plus what only a training run holds: after training,
// rank 0's generator KV cache for the samples. Pure functions but for
// available_memory().
#pragma once
#include <cstdint>
#include <string>

#include "core/status.h"
#include "plan/memory_model.h"
#include "runtime/config.h"

namespace crucible::runtime {

using plan::MemoryEstimate;

MemoryEstimate estimate_memory(const Config& cfg, int world, int rank);

// What this process may still take: /proc/meminfo's MemAvailable, or less
// under an address-space limit (RLIMIT_AS minus what is mapped already).
uint64_t available_memory();

// Ok when ranks_here ranks of `per_rank` fit in `available` with a margin for
// the runtime (libraries, threads, MPI); else invalid, naming what is needed
// and what is there. `where` names the memory when it is not the host's
// ("on cuda:0": a GPU run's model, optimizer and activations live there).
Status check_memory_fits(const MemoryEstimate& per_rank, int ranks_here, uint64_t available,
                         const std::string& where = "");
// The same for rank `rank` of a `world`-rank job of `cfg`, adding the
// cheapest change of computation that would fit at this layout, as
// check_memory_budget names it.
Status check_memory_fits(const Config& cfg, int world, int rank, int ranks_here, uint64_t available,
                         const std::string& where = "");

// Ok when every rank of a `world`-rank job fits train.memory_limit_gb (0: no
// limit). Else invalid: what the largest rank needs, the budget, the
// cheapest change of computation that fits at this layout (train.fused_head,
// then train.recompute, as the planner tries them), and the model-parallel
// layouts of up to 8 ranks (tp x pp, one data-parallel rank) whose every
// rank would fit, with their need, largest first.
Status check_memory_budget(const Config& cfg, int world);

}  // namespace crucible::runtime
