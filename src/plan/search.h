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
//
// Constrained (`plan --layout` with fields left out): the same search over
// only the candidates whose given fields (SearchOptions::fixed) have the
// given values; a given value is tried even where the pruning would skip
// it, so what rules it out is counted by reason rather than passed over.
//
// Cost: the candidates (a few per divisor of the devices, of the per-rank
// batch, and the schedules, precisions, ZeRO stages and memory savings)
// times one prediction each, which is linear in the model's layers
// (plan/time_model.h), so the search is too.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "plan/time_model.h"

namespace crucible::plan {

// The fields of kSearchedFields a caller fixes; those left unset are
// searched.
struct LayoutConstraints {
  std::optional<int> dp, tp, pp, v, mb, m, zero;
  std::optional<bool> sp, fused_head;
  std::optional<std::string> schedule, recompute, precision;

  // The fields of `parsed` that its text gave.
  static LayoutConstraints from(const ParsedLayout& parsed);
  // Whether c has every fixed field's value.
  bool matches(const Candidate& c) const;
};

struct SearchOptions {
  int devices = 1;
  int64_t global_batch = 1;  // sequences per optimizer step
  int top = 5;
  std::vector<std::string> precisions = {"fp32", "bf16"};
  int max_micro_batch = 64;  // largest micro-batch size tried (unless mb or m is fixed)
  LayoutConstraints fixed;
  // The fields the search does not choose (moments, grad_dtype, split,
  // bucket_mb, overlap, reproducible) come from here.
  Candidate base;
};

struct SearchResult {
  std::vector<Prediction> best;  // runs, fastest first, at most `top`
  int64_t evaluated = 0;         // layouts whose time was predicted
  std::map<std::string, int64_t> rejected;  // reason -> count
  std::map<std::string, std::string> why;   // reason -> the first such layout's whole message
};

Result<SearchResult> search(const nn::GPTConfig& model, const Cluster& cluster, const SearchOptions& opt);

}  // namespace crucible::plan
