// Which GPU each rank of a multi-rank GPU job uses (docs/parallelism.md,
// "Ranks on GPUs"), decided from every rank's host and that host's GPUs
// before anything is allocated:
//   - ranks take their host's GPUs in local order (the i-th rank of a host
//     gets its GPU i, among those CUDA_VISIBLE_DEVICES leaves visible);
//     run.device = "cuda:N" with several ranks on a host puts them all on N;
//   - more ranks on a host than it has GPUs is refused, unless
//     dist.share_gpus, which lets ranks share round-robin (the collectives
//     then take the staged path: comm/device_comm.h);
//   - a tensor-parallel group (tp consecutive ranks) must sit inside one
//     host: its collectives run on every layer and need the node's links.
// Refusals are one line naming the host and the numbers.
#pragma once
#include <string>
#include <vector>

#include "comm/comm.h"
#include "core/status.h"

namespace crucible::runtime {

struct GpuPlacement {
  std::vector<int> gpu;      // per rank: the device index on its host
  std::vector<int> sharing;  // per rank: how many ranks use its GPU (itself included)
  bool shared = false;       // two ranks of one host use one GPU
};

// hosts[r], gpus[r]: rank r's host and how many GPUs that host shows it.
// `pinned`: the index run.device names explicitly ("cuda:N"), or -1 ("cuda":
// by local rank).
Result<GpuPlacement> place_on_gpus(const std::vector<std::string>& hosts,
                                   const std::vector<int>& gpus, int tp, int pinned, bool share);

// The same, collective over the job: every rank's host and GPU count
// gathered, every rank the same answer (or the same refusal).
Result<GpuPlacement> place_ranks_on_gpus(comm::Comm& comm, int gpus_here, int tp, int pinned,
                                         bool share);

}  // namespace crucible::runtime
