#include "runtime/memory_estimate.h"

#include "kernels/gemm.h"

#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/plan_run.h"
#include "runtime/train_step.h"

namespace crucible::runtime {

namespace {

// What each process holds besides crucible's buffers: its heap, thread
// stacks, Open MPI's shared-memory segments and the private pages of the
// libraries (a small 1-process run peaks at ~22 MB of RSS here; ranks add MPI's
// buffers).
constexpr uint64_t kProcessOverhead = 96ull << 20;

const auto& gb = plan::format_bytes;

}  // namespace

MemoryEstimate estimate_memory(const Config& cfg, int world, int rank) {
  // The run's layout (the whole model on one rank when the layout is not
  // valid: that is refused on its own).
  plan::Candidate c = candidate_of(cfg, world);
  auto layout = TrainStep::plan_layout(cfg, world);
  if (!layout) {
    c.dp = c.tp = c.pp = c.v = 1, c.sp = false, c.schedule = "1f1b", c.split = "even";
    layout = parallel::Layout::make({}, 1, cfg.model, 1);
    rank = 0;
  }
  MemoryEstimate e = plan::estimate_memory(cfg.model, c, *layout, rank, !kernels::gemm_bf16_native());
  // After training, samples: the KV cache ((L, T, C) keys and values).
  const uint64_t kv = 2ull * uint64_t(cfg.model.n_layer) * uint64_t(cfg.model.seq_len) * uint64_t(cfg.model.n_embd) * 4;
  e.snapshot += cfg.run.sample_tokens > 0 && rank == 0 ? kv : 0;
  return e;
}

uint64_t available_memory() {
  uint64_t avail = UINT64_MAX;
  std::ifstream mi("/proc/meminfo");
  for (std::string key; mi >> key;) {
    uint64_t kb = 0;
    std::string unit;
    mi >> kb >> unit;
    if (key == "MemAvailable:") avail = kb * 1024;
  }
  struct rlimit rl {};
  if (::getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
    uint64_t mapped = 0;
    std::ifstream st("/proc/self/status");
    for (std::string key; st >> key;) {
      uint64_t kb = 0;
      std::string unit;
      if (key == "VmSize:" && st >> kb >> unit) mapped = kb * 1024;
    }
    const uint64_t left = uint64_t(rl.rlim_cur) > mapped ? uint64_t(rl.rlim_cur) - mapped : 0;
    avail = std::min(avail, left);
  }
  return avail;
}

Status check_memory_fits(const MemoryEstimate& per_rank, int ranks_here, uint64_t available, const std::string& where) {
  const uint64_t ranks = uint64_t(std::max(1, ranks_here));
  const uint64_t need = (per_rank.total() + kProcessOverhead) * ranks;
  if (need <= available) return Status::ok();
  return Status::invalid("[memory] this run needs ~" + gb(per_rank.total()) + " per rank (" +
                         per_rank.describe() + ") + " + gb(kProcessOverhead) + " for the process" +
                         (ranks > 1 ? ", x " + std::to_string(ranks) + " ranks on this machine" : "") + " = " +
                         gb(need) + "; " + gb(available) + " is " + (where.empty() ? "available" : "free " + where) +
                         "; use a smaller model, batch or sequence, fewer ranks per machine, or"
                         " dist.zero to shard the optimizer");
}

namespace {

// The largest estimate over the job's ranks (the first and last pipeline
// stages hold more than the middle ones; rank 0 the checkpoint copy).
uint64_t largest_rank_need(const Config& cfg, int world) {
  uint64_t need = 0;
  for (int r = 0; r < world; ++r) need = std::max(need, estimate_memory(cfg, world, r).total());
  return need;
}

// The cheapest change of computation that fits `budget` at this layout, in
// the planner's order (plan/search.h): the fused head, then each stronger
// recompute policy without and with it. "" when none does.
std::string saving_that_fits(const Config& cfg, int world, uint64_t budget) {
  const std::vector<std::string> policies = {"none", "selective", "full"};
  const auto now = std::find(policies.begin(), policies.end(), cfg.train.recompute);
  for (auto rc = now; rc != policies.end(); ++rc)
    for (bool fused : {false, true}) {
      if (cfg.train.fused_head && !fused) continue;              // fused already: it stays
      if (rc == now && fused == cfg.train.fused_head) continue;  // the run as it is
      Config c = cfg;
      c.train.recompute = *rc;
      c.train.fused_head = fused;
      const uint64_t need = largest_rank_need(c, world);
      if (need > budget) continue;
      std::string sets;
      if (*rc != cfg.train.recompute) sets = "train.recompute=" + *rc;
      if (fused != cfg.train.fused_head) sets += std::string(sets.empty() ? "" : " and ") + "train.fused_head=true";
      return sets + " fits (~" + gb(need) + ")";
    }
  return "";
}

}  // namespace

Status check_memory_fits(const Config& cfg, int world, int rank, int ranks_here, uint64_t available,
                         const std::string& where) {
  Status s = check_memory_fits(estimate_memory(cfg, world, rank), ranks_here, available, where);
  if (s.is_ok()) return s;
  const uint64_t share = available / uint64_t(std::max(1, ranks_here));
  const std::string saving = saving_that_fits(cfg, world, share > kProcessOverhead ? share - kProcessOverhead : 0);
  return saving.empty() ? s : Status::invalid(s.message() + "; at this layout " + saving + " per rank");
}

Status check_memory_budget(const Config& cfg, int world) {
  if (cfg.train.memory_limit_gb <= 0) return Status::ok();
  const uint64_t budget = uint64_t(cfg.train.memory_limit_gb * 1e9);
  const uint64_t need = largest_rank_need(cfg, world);
  if (need <= budget) return Status::ok();
  std::string fits;
  for (int n : {2, 4, 8})
    for (int tp = n; tp >= 1; tp /= 2) {
      Config c = cfg;
      c.dist.tp = tp;
      c.dist.pp = n / tp;
      c.dist.pp_virtual = 1;
      c.dist.pp_schedule = "1f1b";
      if (!TrainStep::plan_layout(c, n)) continue;  // does not divide, or too few micro-batches
      const uint64_t it = largest_rank_need(c, n);
      if (it <= budget)
        fits += std::string(fits.empty() ? "" : ", ") + "tp=" + std::to_string(tp) + " pp=" + std::to_string(n / tp) +
                " (" + gb(it) + ")";
    }
  const MemoryEstimate e = estimate_memory(cfg, world, 0);
  const std::string saving = saving_that_fits(cfg, world, budget);
  return Status::invalid("[memory] train.memory_limit_gb = " + gb(budget) + " per rank, but this run needs ~" +
                         gb(need) + " on its largest rank (rank 0: " + e.describe() + "); " +
                         (saving.empty() ? "" : "at this layout " + saving + "; ") +
                         (fits.empty() ? "no layout of up to 8 ranks (dist.tp x dist.pp) fits it either"
                                       : "layouts that fit, per rank: " + fits));
}

}  // namespace crucible::runtime
