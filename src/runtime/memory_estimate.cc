#include "runtime/memory_estimate.h"

#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "core/allocator.h"
#include "nn/gpt.h"
#include "parallel/pipeline.h"
#include "runtime/train_step.h"

namespace crucible::runtime {

namespace {

std::string gb(uint64_t bytes) {
  char buf[32];
  if (bytes >= (uint64_t(1) << 30))
    std::snprintf(buf, sizeof buf, "%.1f GB", double(bytes) / 1e9);
  else
    std::snprintf(buf, sizeof buf, "%.0f MB", double(bytes) / 1e6);
  return buf;
}

uint64_t rounded(uint64_t bytes) { return bytes ? Allocator::size_class(size_t(bytes)) : 0; }

// What each process holds besides crucible's buffers: its heap, thread
// stacks, Open MPI's shared-memory segments and the private pages of the
// libraries (a small 1-process run peaks at ~22 MB of RSS here; ranks add MPI's
// buffers).
constexpr uint64_t kProcessOverhead = 96ull << 20;
constexpr uint64_t kGemmScratchAllowance = 4ull << 20;

}  // namespace

std::string MemoryEstimate::describe() const {
  std::string s = "weights " + gb(weights) + ", gradients " + gb(grads) + ", optimizer " + gb(optimizer) +
                  ", activations " + gb(activations);
  if (snapshot) s += ", checkpoint copy " + gb(snapshot);
  return s;
}

MemoryEstimate estimate_memory(const Config& cfg, int world, int rank) {
  MemoryEstimate e;
  // This rank's part of the model and its pipeline's contexts in flight (the
  // whole model, one context, when the layout is not valid: that is refused
  // on its own).
  auto layout = TrainStep::plan_layout(cfg, world);
  nn::GPTPart part = whole_part(cfg);
  int contexts = 1, dp = world, pp = 1, tp = 1;
  bool leader = true;
  if (layout) {
    const parallel::Coords c = layout->coords(rank);
    part = stage_part(*layout, c, cfg);
    dp = layout->dp(), pp = layout->pp(), tp = layout->tp();
    leader = c.dp == 0;
    auto s = parallel::make_schedule(layout->schedule(), pp, layout->virtual_stages(), cfg.train.grad_accum);
    if (s) contexts = parallel::PipelineStage::peak_contexts(*s, c.pp) + (pp > 1 ? 1 : 0);  // + a send in flight
  }
  const uint64_t P = nn::GPT::flat_params(cfg.model, part);
  const uint64_t B = uint64_t(cfg.train.batch_size), T = uint64_t(cfg.model.seq_len);
  e.weights = rounded(P * 4) + (part.precision == DType::bf16 ? rounded(P * 2) : 0);  // + the bf16 copy
  e.grads = rounded(P * 4);
  const bool sharded = cfg.dist.zero > 0 && dp > 1;
  const uint64_t shard = sharded ? (P + uint64_t(dp) - 1) / uint64_t(dp) + 16 : P;
  e.optimizer = 2 * rounded(shard * (cfg.optim.moments == "bf16" ? 2 : 4));
  size_t per_context = 0;
  for (int c = 0; c < part.num_chunks(); ++c)
    per_context = std::max(per_context, nn::GPT::activation_bytes(cfg.model, part, c, int(B), int(T),
                                                                  cfg.dist.pp_schedule == "zb-h1" && pp > 1));
  e.activations = uint64_t(contexts) * rounded(per_context);
  e.other = rounded(B * T * 4);  // the row of ones for bias gradients (nn/linear.cc)
  if (part.precision == DType::bf16) e.other += rounded(B * T * 2);  // and its bf16 twin
  // Tensor parallel: the allreduce's staging (parallel/tensor_parallel.h),
  // tp activations of (B,T,C); sequence parallel, tp LayerNorm gradients of
  // (C) (its activations are gathered into the arena instead).
  if (tp > 1)
    e.other += rounded(uint64_t(tp) * (part.sequence_parallel ? 1 : B * T) * uint64_t(cfg.model.n_embd) * 4);
  // oneDNN's scratchpad, taken from crucible's allocator at the largest size
  // a primitive asked for; oneDNN decides it (measured on AVX-512 here:
  // 2 MiB for tiny, 0.6 MiB for gpt2-124M): an allowance, not a formula.
  e.other += kGemmScratchAllowance;
  if (sharded) e.other += rounded(shard * 4);  // ZeRO-2's reduce-scatter target
  // The checkpoint snapshot: params and both moments of what the rank
  // writes (rank 0 the whole model; sharded, every part's first
  // data-parallel rank its part), or under ZeRO gathers the moments into.
  const bool parts = pp > 1 || tp > 1;
  if (rank == 0 || (parts && leader) || sharded) e.snapshot = 3 * P * 4;
  // After training, samples: the KV cache ((L, T, C) keys and values).
  const uint64_t kv = 2ull * uint64_t(cfg.model.n_layer) * T * uint64_t(cfg.model.n_embd) * 4;
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

Status check_memory_fits(const MemoryEstimate& per_rank, int ranks_here, uint64_t available) {
  const uint64_t ranks = uint64_t(std::max(1, ranks_here));
  const uint64_t need = (per_rank.total() + kProcessOverhead) * ranks;
  if (need <= available) return Status::ok();
  return Status::invalid("[memory] this run needs ~" + gb(per_rank.total()) + " per rank (" +
                         per_rank.describe() + ") + " + gb(kProcessOverhead) + " for the process" +
                         (ranks > 1 ? ", x " + std::to_string(ranks) + " ranks on this machine" : "") + " = " +
                         gb(need) + "; " + gb(available) +
                         " is available; use a smaller model, batch or sequence, fewer ranks per machine, or"
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

}  // namespace

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
  return Status::invalid("[memory] train.memory_limit_gb = " + gb(budget) + " per rank, but this run needs ~" +
                         gb(need) + " on its largest rank (rank 0: " + e.describe() + "); " +
                         (fits.empty() ? "no layout of up to 8 ranks (dist.tp x dist.pp) fits it either"
                                       : "layouts that fit, per rank: " + fits));
}

}  // namespace crucible::runtime
