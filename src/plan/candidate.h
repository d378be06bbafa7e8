// One point of the planner's space: how a job of a given model and global
// batch is split over devices and computed. It is what `crucible plan`
// searches, what `--layout "dp=8,tp=8,..."` names, and what a training run's
// config amounts to (runtime/plan_run.h turns one into the other), so the
// memory and time models see a run and a hypothetical layout alike.
//
// The rank grid is parallel::Layout's (tp fastest, then pp, then dp); the
// micro-batch count m is per data-parallel rank and optimizer step
// (train.grad_accum), so the global batch is dp x mb x m sequences.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "nn/gpt.h"
#include "parallel/layout.h"

namespace crucible::plan {

struct Candidate {
  int dp = 1, tp = 1, pp = 1, v = 1;
  int mb = 1;  // sequences per micro-batch (train.batch_size)
  int m = 1;   // micro-batches per optimizer step (train.grad_accum)
  int zero = 0;
  bool sp = false;                   // sequence parallelism (tp > 1 only)
  std::string schedule = "1f1b";     // 1f1b | interleaved | zb-h1
  std::string split = "even";        // even | cost
  std::string recompute = "none";    // none | selective | full
  std::string precision = "fp32";    // fp32 | bf16
  std::string moments = "f32";       // f32 | bf16
  std::string grad_dtype = "f32";    // f32 | bf16
  bool fused_head = false;           // train.fused_head: the (B,T,V) logits never stored
  double bucket_mb = 25;
  bool overlap = true;
  bool reproducible = false;  // dist.reproducible: the fixed-order tree reduction

  int64_t world() const { return int64_t(dp) * tp * pp; }
  int64_t global_batch() const { return int64_t(dp) * mb * m; }
  // "dp=2,tp=1,pp=2,v=1,mb=4,m=2,zero=1,recompute=none,sp=false,schedule=1f1b,precision=bf16"
  std::string describe() const;
};

// --layout's text: comma-separated key=value over dp tp pp v mb m zero
// recompute sp schedule precision moments grad_dtype split fused_head; keys not given
// keep `defaults`' values. An unknown key, a bad value, a key given twice, an
// empty field ("tp=2,,pp=1") or sp=true with tp=1 is invalid, naming it.
// given: the keys the text sets, in its order (`crucible plan` searches the
// others of kSearchedFields).
struct ParsedLayout {
  Candidate c;
  std::vector<std::string> given;
  bool has(const std::string& key) const;
};
Result<ParsedLayout> parse_layout(const std::string& text, const Candidate& defaults = {});

// The fields the layout search chooses (plan/search.h), in describe()'s
// order; the others (moments, grad_dtype, split) are the config's.
inline const std::vector<std::string> kSearchedFields = {
    "dp",   "tp",        "pp", "v",        "mb",        "m",
    "zero", "recompute", "sp", "schedule", "precision", "fused_head"};

// The planner's limits: devices (dp x tp x pp), micro-batches per step, and
// schedule actions per pipeline rank (pp x v x m: the schedule is built to
// count the contexts each stage holds).
inline constexpr int64_t kMaxDevices = int64_t(1) << 24;
inline constexpr int64_t kMaxMicroBatches = int64_t(1) << 16;
inline constexpr int64_t kMaxScheduleSteps = int64_t(1) << 21;

// The layout check training makes (parallel::Layout::make: the grid, heads
// and MLP width over tp, blocks over pp x v, micro-batches against pp), plus
// what the planner's fields add: the precision, recompute, moments and
// gradient names, ZeRO's stage, sequence parallelism's token split, and the
// schedule's existence. Invalid, naming the constraint, when it cannot run.
Result<parallel::Layout> check(const nn::GPTConfig& model, const Candidate& c);

// The model part a rank at `at` holds, computing as c says.
nn::GPTPart part_of(const nn::GPTConfig& model, const parallel::Layout& layout, const parallel::Coords& at,
                    const Candidate& c);

}  // namespace crucible::plan
