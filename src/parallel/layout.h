// The parallel layout of a job: how the world's ranks form a grid of data
// (dp), pipeline (pp, with v virtual stages per rank) and tensor (tp)
// parallelism, checked before any communication (torchtitan's ParallelDims).
//
// Rank <-> coordinates, tp varying fastest (a TP group is tp consecutive
// ranks, so it stays on one host), then pp, then dp:
//   rank = (dp_index * pp + pp_index) * tp + tp_index
// The groups are the ranks that share every other coordinate: a TP group
// shares (dp, pp), a PP group (dp, tp), a DP group (pp, tp).
//
// The checks (each failure is one invalid Status naming the constraint, so a
// wrong layout is bad input, exit 2): dp * tp * pp equals the world size;
// model.n_head and the MLP width (4 * n_embd) divide by tp; model.n_layer
// splits evenly over pp * v stages; a pipeline step has at least pp
// micro-batches (train.grad_accum) and, interleaved, a multiple of pp; v > 1
// only with the interleaved schedule. Pure; thread-compatible.
#pragma once
#include <string>
#include <vector>

#include "core/status.h"
#include "comm/comm.h"
#include "nn/gpt.h"

namespace crucible::parallel {

inline constexpr const char* kSchedules[] = {"1f1b", "interleaved", "zb-h1"};
inline constexpr const char* kSplits[] = {"even", "cost"};

struct LayoutSpec {  // what the config asks for ([dist] tp, pp, pp_virtual, pp_schedule, sequence_parallel)
  int tp = 1, pp = 1, virtual_stages = 1;
  std::string schedule = "1f1b";
  bool sequence_parallel = false;
  // How the blocks are cut into the pp x v stages: "even" (the same number
  // each; n_layer must divide) or "cost" (contiguous counts that balance
  // each stage's FLOPs, the LM head and loss counted on the last stage).
  std::string split = "even";
};

struct Coords {
  int dp = 0, pp = 0, tp = 0;
};

// The "cost" split: block counts per stage (each >= 1, summing to n_layer)
// minimising the most expensive stage, a block costing its FLOPs per token
// (24 C^2 + 2 T C) and the last stage also the LM head and loss (2 C V + 5 V).
// Deterministic: of equally good splits, the one whose earliest stages hold
// the fewest blocks.
std::vector<int> cost_balanced_blocks(const nn::GPTConfig& m, int stages);

class Layout {
 public:
  // Checks spec against the world size, the model and the micro-batches.
  static Result<Layout> make(const LayoutSpec& spec, int world, const nn::GPTConfig& model,
                             int micro_batches);

  int world() const { return dp_ * pp_ * tp_; }
  int dp() const { return dp_; }
  int tp() const { return tp_; }
  int pp() const { return pp_; }
  int virtual_stages() const { return v_; }
  const std::string& schedule() const { return schedule_; }
  // Sequence parallelism with the tensor parallelism (false at tp = 1).
  bool sequence_parallel() const { return sp_; }
  // The blocks of global stage s (0 .. pp * v - 1, in model order), as the
  // split decides them.
  nn::BlockRange stage_blocks(const nn::GPTConfig& m, int stage) const;
  const std::string& split() const { return split_; }

  Coords coords(int rank) const;
  int rank_of(const Coords& c) const;
  // The world ranks of the group `rank` belongs to, in the group's rank order.
  std::vector<int> tp_group(int rank) const;
  std::vector<int> pp_group(int rank) const;
  std::vector<int> dp_group(int rank) const;
  // "dp=2 tp=1 pp=2 (v=1, 1f1b)"
  std::string describe() const;

 private:
  int dp_ = 1, tp_ = 1, pp_ = 1, v_ = 1;
  std::string schedule_ = "1f1b";
  bool sp_ = false;
  std::string split_ = "even";
};

// The part of the model the rank at `at` holds under `layout` (pp index p,
// v chunks each): chunk c holds global stage c * pp + p (the split's blocks
// of it), and its tensor-parallel shard of them; fp32, no recomputation.
nn::GPTPart stage_part(const Layout& layout, const Coords& at, const nn::GPTConfig& model);

// Tensor-parallel groups belong inside one host: their allreduces (two per
// block in forward and two in backward, on the critical path) are the most
// frequent collectives of a step. hosts[r] is world rank r's host
// (comm::host_names). "" when every TP group is inside one host, else one
// warning line naming the first group that is not and how to place it.
std::string tp_hosts_warning(const Layout& layout, const std::vector<std::string>& hosts);

// This rank's three groups as sub-communicators of `world` (collective over
// it: every rank calls it with the same layout).
struct Groups {
  std::unique_ptr<comm::Comm> tp, pp, dp;
};
Result<Groups> make_groups(comm::Comm& world, const Layout& layout);

}  // namespace crucible::parallel
