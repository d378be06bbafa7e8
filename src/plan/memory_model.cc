#include "plan/memory_model.h"

#include "plan/time_model.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <mutex>
#include <tuple>

#include "core/allocator.h"
#include "kernels/step_scalars.h"
#include "parallel/embedding_rows.h"
#include "parallel/pipeline.h"
#include "parallel/schedule.h"

namespace crucible::plan {

namespace {

uint64_t rounded(uint64_t bytes) { return bytes ? Allocator::size_class(size_t(bytes)) : 0; }

// oneDNN's scratchpad, taken from crucible's allocator at the largest size a
// primitive asked for; oneDNN decides it (measured on AVX-512 here: 2 MiB for
// tiny on 2 threads, 0.75 MiB on 1, 0.6 MiB for gpt2-124M): an allowance,
// not a formula.
constexpr uint64_t kGemmScratchAllowance = 2ull << 20;

// The contexts pipeline rank p holds at once under (kind, pp, v, m), from the
// schedule itself (cached: the search asks for the same few many times).
int peak_contexts(const std::string& kind, int pp, int v, int m, int p) {
  static std::mutex mu;
  static std::map<std::tuple<std::string, int, int, int>, std::vector<int>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto key = std::make_tuple(kind, pp, v, m);
  auto it = cache.find(key);
  if (it == cache.end()) {
    std::vector<int> peaks(size_t(pp), 1);
    auto s = parallel::make_schedule(kind, pp, v, m);
    if (s)
      for (int r = 0; r < pp; ++r) peaks[size_t(r)] = parallel::PipelineStage::peak_contexts(*s, r);
    it = cache.emplace(key, std::move(peaks)).first;
  }
  return it->second[size_t(p)];
}

}  // namespace

std::string format_bytes(uint64_t bytes) {
  char buf[32];
  if (bytes >= (uint64_t(1) << 30))
    std::snprintf(buf, sizeof buf, "%.1f GB", double(bytes) / 1e9);
  else
    std::snprintf(buf, sizeof buf, "%.0f MB", double(bytes) / 1e6);
  return buf;
}

std::string MemoryEstimate::describe() const {
  std::string s = "weights " + format_bytes(weights) + ", gradients " + format_bytes(grads) + ", optimizer " +
                  format_bytes(optimizer) + ", activations " + format_bytes(activations);
  if (snapshot) s += ", checkpoint copy " + format_bytes(snapshot);
  return s;
}

MemoryEstimate estimate_memory(const nn::GPTConfig& model, const Candidate& c, const parallel::Layout& layout,
                               int rank, bool widened_bf16_gemms) {
  MemoryEstimate e;
  const parallel::Coords at = layout.coords(rank);
  const nn::GPTPart part = part_of(model, layout, at, c);
  const int dp = layout.dp(), pp = layout.pp(), tp = layout.tp();
  // A stage after the first sends each backward's input gradient without
  // waiting: the next micro-batch's forward takes another arena while that
  // send is in flight (+1). The first stage sends only activations, from
  // contexts the schedule holds anyway.
  if (pp > 1)
    e.contexts = peak_contexts(layout.schedule(), pp, layout.virtual_stages(), c.m, at.pp) + (at.pp > 0 ? 1 : 0);
  const uint64_t P = nn::GPT::flat_params(model, part);
  const uint64_t B = uint64_t(c.mb), T = uint64_t(model.seq_len);
  const bool bf16 = part.precision == DType::bf16;
  e.weights = rounded(P * 4) + (bf16 ? rounded(P * 2) : 0);  // + the bf16 copy
  e.grads = rounded(P * 4);
  const bool sharded = c.zero > 0 && dp > 1;
  const uint64_t shard = sharded ? (P + uint64_t(dp) - 1) / uint64_t(dp) + 16 : P;
  e.optimizer = 2 * rounded(shard * (c.moments == "bf16" ? 2 : 4));
  size_t per_context = 0;
  const bool split_backward = layout.schedule() == "zb-h1" && pp > 1;
  for (int k = 0; k < part.num_chunks(); ++k)
    per_context =
        std::max(per_context, nn::GPT::activation_bytes(model, part, k, int(B), int(T), split_backward));
  e.activations = uint64_t(e.contexts) * rounded(per_context);
  e.other = rounded(B * T * 4);           // the row of ones for bias gradients (nn/linear.cc)
  if (bf16) e.other += rounded(B * T * 2);  // and its bf16 twin
  // The step's scalars (the optimizer's) and the model's loss read-back
  // (kernels/step_scalars.h), one each.
  e.other += 2 * rounded(sizeof(kernels::StepScalars));
  // Tensor parallel: the allreduce's gathered pieces (parallel/tensor_parallel.h,
  // a pool block on the activations' device), tp activations of (B,T,C);
  // sequence parallel, tp LayerNorm gradients of (C) (its activations are
  // gathered into the arena instead).
  if (tp > 1) e.other += rounded(uint64_t(tp) * (part.sequence_parallel ? 1 : B * T) * uint64_t(model.n_embd) * 4);
  // The embedding's wte gradient rows, reduced apart (parallel/embedding_rows.h),
  // counted as if overlap is on (the default).
  if (parallel::EmbeddingGradRows::applies(layout, model, c.m, c.mb)) {
    const uint64_t block = parallel::EmbeddingGradRows::block_bytes(size_t(c.m) * B * T, model.n_embd);
    e.other += rounded(block) + rounded(uint64_t(dp) * block);
  }
  e.other += kGemmScratchAllowance;
  // A CPU without a bf16 matmul runs a bf16 GEMM on f32 copies of its
  // operands and its product (kernels/gemm.cc's widening buffer, grown to
  // the largest GEMM): forward (m, n, k) and both backward GEMMs touch the
  // same m k + k n + m n elements.
  if (bf16 && widened_bf16_gemms) {
    double widest = 0;
    for (const GemmShape& g : forward_gemms(model, c))
      if (g.block || part.head) widest = std::max(widest, g.m * g.k + g.k * g.n + g.m * g.n);
    e.other += rounded(uint64_t(widest) * 4);
  }
  // The gradient reduction's buffers (parallel/data_parallel.h,
  // tree_reduce.h): the reproducible tree's log2(m) + 1 partial sums and
  // its receive buffer; else ZeRO-2's reduce-scatter target (f32 gradients),
  // or with bf16 gradients the rounded copy and the pieces received (W
  // pieces of 1/W each: about P).
  if (c.reproducible) {
    int levels = 1;
    for (int a = c.m; a > 1; a /= 2) ++levels;
    e.other += uint64_t(levels) * rounded(P * 4) + (dp > 1 ? rounded(P * 4) : 0);
  } else if (dp > 1 && c.grad_dtype == "bf16") {
    e.other += rounded(P * 2) + rounded(P * 2);
  } else if (sharded && c.zero == 2) {
    e.other += rounded(shard * 4);
  }
  // The checkpoint snapshot (runtime/checkpointer.h): the weights of what
  // the rank writes (rank 0 the whole model's; with model parallelism every
  // part's first data-parallel rank its part) and its moments, under ZeRO
  // every rank its shard of them.
  const bool parts = pp > 1 || tp > 1;
  const bool weights = at.dp == 0 && (rank == 0 || parts);
  if (weights || sharded) e.snapshot = (weights ? P * 4 : 0) + 2 * shard * 4;
  return e;
}

LargestRank largest_rank(const nn::GPTConfig& model, const Candidate& c, const parallel::Layout& layout,
                         bool widened_bf16_gemms) {
  // Every (pp index) of data-parallel rank 0 and tensor rank 0 (the others
  // hold as much or less: no checkpoint copy, the same shard sizes). Under
  // the even split the middle stages hold no more blocks than the ends, no
  // embedding or head, and no more contexts than stage 0: the ends suffice.
  std::vector<int> stages;
  for (int p = 0; p < layout.pp(); ++p)
    if (layout.split() != "even" || p == 0 || p == layout.pp() - 1) stages.push_back(p);
  LargestRank best;
  bool first = true;
  for (int p : stages) {
    const int r = layout.rank_of({0, p, 0});
    MemoryEstimate e = estimate_memory(model, c, layout, r, widened_bf16_gemms);
    if (first || e.total() > best.estimate.total()) best = {r, e}, first = false;
  }
  return best;
}

}  // namespace crucible::plan
