#include "runtime/gpu_placement.h"

#include <map>

namespace crucible::runtime {

Result<GpuPlacement> place_on_gpus(const std::vector<std::string>& hosts,
                                   const std::vector<int>& gpus, int tp, int pinned, bool share) {
  const size_t W = hosts.size();
  if (gpus.size() != W)
    return Status::invalid("[launch] GPU placement: a GPU count for every rank is needed");
  // A tensor-parallel group: ranks g*tp .. g*tp + tp - 1 (tp varies fastest).
  if (tp > 1)
    for (size_t first = 0; first + 1 < W; first += size_t(tp))
      for (size_t r = first + 1; r < std::min(W, first + size_t(tp)); ++r)
        if (hosts[r] != hosts[first])
          return Status::invalid(
              "[launch] tensor-parallel group of ranks " + std::to_string(first) + ".." +
              std::to_string(first + size_t(tp) - 1) + " spans hosts " + hosts[first] + " and " +
              hosts[r] + ": tp = " + std::to_string(tp) +
              " must stay inside a node (give each host a multiple of tp ranks)");
  GpuPlacement p;
  std::map<std::string, int> next;  // the host's next local rank
  std::map<std::string, int> ranks_on;
  for (const std::string& h : hosts) ++ranks_on[h];
  for (size_t r = 0; r < W; ++r) {
    const std::string& host = hosts[r];
    const int local = next[host]++, G = gpus[r], here = ranks_on[host];
    if (G <= 0)
      return Status::invalid("[launch] rank " + std::to_string(r) + "'s host " + host +
                             " has no GPU");
    if (pinned >= G)
      return Status::invalid("[launch] run.device = cuda:" + std::to_string(pinned) +
                             ", but host " + host + " has " + std::to_string(G) + " GPU(s)");
    const int gpu = pinned >= 0 ? pinned : local % G;
    const bool shares = pinned >= 0 ? here > 1 : here > G;
    if (shares && !share) {
      if (pinned >= 0)
        return Status::invalid(
            "[launch] run.device = cuda:" + std::to_string(pinned) + " puts " +
            std::to_string(here) + " ranks of host " + host +
            " on one GPU: set run.device = \"cuda\" (one GPU per rank) or dist.share_gpus = true");
      return Status::invalid(
          "[launch] " + std::to_string(here) + " ranks on host " + host + " need " +
          std::to_string(here) + " GPUs, it has " + std::to_string(G) +
          ": use fewer ranks per host, or dist.share_gpus = true to share them (staged "
          "collectives, for tests)");
    }
    p.shared = p.shared || shares;
    p.gpu.push_back(gpu);
  }
  std::map<std::pair<std::string, int>, int> on_gpu;  // (host, gpu) -> ranks
  for (size_t r = 0; r < W; ++r) ++on_gpu[{hosts[r], p.gpu[r]}];
  for (size_t r = 0; r < W; ++r) p.sharing.push_back(on_gpu[{hosts[r], p.gpu[r]}]);
  return p;
}

Result<GpuPlacement> place_ranks_on_gpus(comm::Comm& comm, int gpus_here, int tp, int pinned,
                                         bool share) {
  auto hosts = comm::host_names(comm);
  if (!hosts) return hosts.status();
  std::vector<int32_t> counts(size_t(comm.size()));
  const int32_t mine = gpus_here;
  CRUCIBLE_RETURN_IF_ERROR(comm.allgather_bytes(&mine, sizeof(mine), counts.data()));
  return place_on_gpus(*hosts, std::vector<int>(counts.begin(), counts.end()), tp, pinned, share);
}

}  // namespace crucible::runtime
