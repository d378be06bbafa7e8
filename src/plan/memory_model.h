// The memory one rank of a layout needs, computed before anything large is
// allocated: the planner's memory model and the check that refuses a run
// that cannot fit (runtime/memory_estimate.h) are this one function.
//
// Per rank, of its part of the model under the layout (a pipeline stage's
// chunks, its tensor-parallel shard):
//   weights      the f32 flat buffer, and its bf16 working copy in bf16 runs
//   gradients    the f32 flat buffer (as large as the weights')
//   optimizer    AdamW's two moments, f32 or bf16, 1/dp of them under ZeRO
//                (+16 floats of a shard's alignment)
//   activations  one arena per micro-batch context the schedule holds at once
//                (parallel::PipelineStage::peak_contexts, + 1 for a send in
//                flight under a pipeline), each nn::GPT::activation_bytes of
//                the rank's largest chunk (exact for every precision,
//                recompute, split backward and sequence parallelism: the
//                arena is reserved at that size up front)
//   other        the GEMM's row of ones for bias gradients (and its bf16
//                twin), the step's scalars and the loss's (two
//                StepScalars), the gradient reduction's buffers (ZeRO-2's
//                reduce-scatter target, bf16 gradients' wire and receive
//                copies, the reproducible tree's partial sums, the
//                embedding's wte gradient rows: parallel/embedding_rows.h), an
//                allowance for oneDNN's scratchpad, and on CPUs without a
//                bf16 matmul the f32 widening buffer of bf16 GEMMs
//   snapshot     outside crucible's allocator: the host copy a checkpoint is
//                written from (params and both moments of what this rank
//                writes)
// Every allocator buffer is counted as the allocator rounds it
// (Allocator::size_class), so the sum is what the allocator's peak reads.
// Pure.
#pragma once
#include <cstdint>
#include <string>

#include "parallel/layout.h"
#include "plan/candidate.h"

namespace crucible::plan {

struct MemoryEstimate {
  uint64_t weights = 0, grads = 0, optimizer = 0, activations = 0, other = 0;  // crucible's allocator
  uint64_t snapshot = 0;  // host copy for checkpoints (std::vector)
  int contexts = 1;       // micro-batch activation contexts held at once
  uint64_t allocator_bytes() const { return weights + grads + optimizer + activations + other; }
  uint64_t total() const { return allocator_bytes() + snapshot; }
  // "weights 21.3 MB, gradients 21.3 MB, optimizer 42.6 MB, activations 243 MB, checkpoint copy 64 MB"
  std::string describe() const;
};

// "21.3 MB", "1.2 GB" (10^6, 10^9 bytes).
std::string format_bytes(uint64_t bytes);

// Rank `rank` of `layout` (checked: plan::check) running `c`.
// `widened_bf16_gemms`: the machine has no bf16 matmul, so bf16 GEMMs run on
// f32 copies of their operands (kernels::gemm_bf16_native() false); the
// planner's clusters are taken to have one.
MemoryEstimate estimate_memory(const nn::GPTConfig& model, const Candidate& c, const parallel::Layout& layout,
                               int rank, bool widened_bf16_gemms = false);

// The rank that needs the most (the first and last pipeline stages hold
// more than the middle ones, rank 0 writes the checkpoint), and its estimate.
struct LargestRank {
  int rank = 0;
  MemoryEstimate estimate;
};
LargestRank largest_rank(const nn::GPTConfig& model, const Candidate& c, const parallel::Layout& layout,
                         bool widened_bf16_gemms = false);

}  // namespace crucible::plan
