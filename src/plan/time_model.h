// The planner's step-time model: one layout of one model on one cluster,
// predicted from first principles (docs/plan.md, "Time model").
//
// Per micro-batch and model chunk, on the rank's share of a device:
//   GEMMs        every forward GEMM of a block, (M tokens) x (its tensor-
//                parallel shard), and backward's two (input and weight
//                gradients), each at the device's efficiency for its shape
//   attention    the causal core's FLOPs (forward 2 b h T^2 d; backward
//                2.5x: the scores recomputed, dQ, dK, dV) at the attention
//                kernel's efficiency
//   memory       the fused LayerNorm+residual, bias+GELU, embedding and
//                softmax+cross-entropy passes, by the bytes they stream, at
//                the device's memory bandwidth x memory_efficiency
//   TP           two allreduces per block each way (sequence parallel: an
//                all-gather and a reduce-scatter each), on the link the TP
//                group spans
//   recompute    selective: the attention core and GELU again in backward;
//                full: the whole block forward again
// Per optimizer step: m micro-batches through the slowest stage, plus the
// schedule's bubble (parallel::theoretical_bubble: (p-1)/m for 1F1B,
// (p-1)/(v m) interleaved, (p-1)/(3m) ZB-H1) and the activations and
// gradients crossing stage boundaries (p2p); the data-parallel reduction
// (ring alpha-beta on the DP link; overlapped with the last micro-batch's
// backward when dist.overlap, except its last bucket), ZeRO's parameter
// all-gather and the tied embedding's sum; the optimizer (AdamW, the norm,
// streaming the shard's bytes); the loader's wait and the loop's overhead
// from the cluster file.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "nn/gpt.h"
#include "plan/candidate.h"
#include "plan/cluster.h"
#include "plan/memory_model.h"

namespace crucible::plan {

// Seconds per optimizer step, by phase (on the slowest stage). Their sum is
// the step time.
struct Breakdown {
  double forward = 0, backward = 0;  // compute (backward includes recomputation)
  double recompute = 0;              // the part of backward that recomputes (informational, inside backward)
  double tp_comm = 0;                // tensor-parallel collectives (inside forward/backward's wall time when measured)
  double pp_comm = 0;                // stage-boundary sends and receives
  double bubble = 0;                 // the pipeline's idle time
  double dp_comm = 0;                // exposed data-parallel and tied-embedding communication
  double optimizer = 0;              // gradient norm + AdamW
  double data_wait = 0, other = 0;   // loader; gradient zeroing and the loop's overhead
  double total() const {
    return forward + backward + tp_comm + pp_comm + bubble + dp_comm + optimizer + data_wait + other;
  }
};

struct Prediction {
  Candidate layout;
  bool runs = false;       // divides and fits
  bool divides = false;    // the layout can be formed (its time is predicted)
  bool fits = false;       // and its largest rank fits a device
  std::string why_not;     // when !runs: the constraint it breaks
  MemoryEstimate memory;   // the largest rank's
  int peak_rank = 0;
  uint64_t device_memory_bytes = 0;  // what one rank may use on this cluster
  double step_time_s = 0, tokens_per_s = 0, mfu = 0;
  double model_flops_per_step = 0;
  // The devices' power at load (Device::power_w) over the step, per token;
  // 0 when the cluster gives no power.
  double energy_j_per_token = 0;
  Breakdown breakdown;
};

// Memory first (cheap), then time. A layout that does not divide comes back
// with runs = false and why_not; one that divides but does not fit also has
// its time predicted (what it would take on devices with more memory).
Prediction predict(const nn::GPTConfig& model, const Candidate& c, const Cluster& cluster);

// The GEMMs of one micro-batch on one rank, as (m, n, k): a block's four
// forward GEMMs (qkv, attention projection, fc, MLP projection: their
// tensor-parallel shards) and the LM head's over this rank's vocabulary rows
// (block = false). Each forward (m, n, k) has two backward GEMMs: the input
// gradient (m, k, n) and the weight gradient (k, n, m).
struct GemmShape {
  double m, n, k;
  bool block;
};
std::vector<GemmShape> forward_gemms(const nn::GPTConfig& model, const Candidate& c);

// The memory a rank of `cluster` may use (a shared node's memory split over
// its ranks).
uint64_t device_memory(const Cluster& cluster, int64_t world);

// --json's object (schema: docs/plan.md, "JSON").
nlohmann::json to_json(const Prediction& p);

}  // namespace crucible::plan
