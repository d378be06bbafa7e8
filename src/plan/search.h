// The layout search: every way to run a model with a global batch on N
// devices of a cluster, over dp, tp, pp, virtual stages, micro-batch size
// and count, ZeRO stage, recomputation, sequence parallelism, schedule and
// precision, under the divisibility and memory constraints, best first.
//
// Pruned, not brute force: tp ranges over the divisors of n_head inside a
// node, pp over the divisors of the rest that split the blocks; the memory
// model (cheap) runs before the time model, and the memory savings are
// tried from the cheapest up, stopping at the first that fits: the fused LM
// head (train.fused_head: no time in the model), then each recompute policy
// (none, selective, full: a stronger one only adds time) without and with
// it. What was rejected is counted by reason.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "plan/time_model.h"

namespace crucible::plan {

struct SearchOptions {
  int devices = 1;
  int64_t global_batch = 1;  // sequences per optimizer step
  int top = 5;
  std::vector<std::string> precisions = {"fp32", "bf16"};
  int max_micro_batch = 64;  // largest micro-batch size tried
};

struct SearchResult {
  std::vector<Prediction> best;  // runs, fastest first, at most `top`
  int64_t evaluated = 0;         // layouts whose time was predicted
  std::map<std::string, int64_t> rejected;  // reason -> count
};

Result<SearchResult> search(const nn::GPTConfig& model, const Cluster& cluster, const SearchOptions& opt);

}  // namespace crucible::plan
