// The memory a training run needs, computed from its config before anything
// large is allocated, and the check that refuses a run that cannot fit
// (DESIGN.md: bad input is one line and exit 2, never an abort mid-run).
//
// Per rank, of its part of the model under the job's layout (a pipeline
// stage's chunks): weights and gradients (the flat buffers), AdamW's two
// moments (1/dp of them under ZeRO), one arena per micro-batch context the
// schedule holds at once (nn::GPT::activation_bytes, reserved up front), the
// GEMM's ones row, and, outside crucible's allocator, the checkpoint snapshot
// (rank 0's of the whole model; each stage's and ZeRO's parts) and the
// generator's KV cache after training. Each allocator buffer is counted as
// the allocator rounds it (Allocator::size_class). Pure functions but for
// available_memory().
#pragma once
#include <cstdint>
#include <string>

#include "core/status.h"
#include "runtime/config.h"

namespace crucible::runtime {

struct MemoryEstimate {
  uint64_t weights = 0, grads = 0, optimizer = 0, activations = 0, other = 0;  // crucible's allocator
  uint64_t snapshot = 0;  // host copy for checkpoints (std::vector)
  uint64_t allocator_bytes() const { return weights + grads + optimizer + activations + other; }
  uint64_t total() const { return allocator_bytes() + snapshot; }
  // "weights 21.3 MB, gradients 21.3 MB, optimizer 42.6 MB, activations 243 MB, checkpoint copy 64 MB"
  std::string describe() const;
};

MemoryEstimate estimate_memory(const Config& cfg, int world, int rank);

// What this process may still take: /proc/meminfo's MemAvailable, or less
// under an address-space limit (RLIMIT_AS minus what is mapped already).
uint64_t available_memory();

// Ok when ranks_here ranks of `per_rank` fit in `available` with a margin for
// the runtime (libraries, threads, MPI); else invalid, naming what is needed
// and what is there.
Status check_memory_fits(const MemoryEstimate& per_rank, int ranks_here, uint64_t available);

// Ok when every rank of a `world`-rank job fits train.memory_limit_gb (0: no
// limit). Else invalid: what the largest rank needs, the budget, and the
// model-parallel layouts of up to 8 ranks (tp x pp, one data-parallel rank)
// whose every rank would fit, with their need, largest first.
Status check_memory_budget(const Config& cfg, int world);

}  // namespace crucible::runtime
