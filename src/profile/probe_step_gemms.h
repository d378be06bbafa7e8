// A run's own GEMMs timed as its training step meets them, for the
// prediction its plan.json makes (profile/local_probe.h).
//
// Timed alone, a GEMM runs faster than inside a step: there its operands
// were written by other kernels long before (a block's saved input is read
// back by its weight gradient only after every later block and the head
// ran), and the GEMM before it left its own operands in the caches. On a
// 2-core Zen 4 the bf16 weight gradients of the default job ran 12-18%
// slower in the step than alone with the caches swept, the fp32 ones 2-5%:
// a prediction from isolated timings came out 8-10% short in bf16.
//
// So the probe replays the step: the forward calls of R blocks (each its own
// operands), the head's, the head's backward, the blocks' backward in
// reverse, repeated, each call timed, and reports one row per planner shape
// (plan::forward_gemms and its backward forms, the keys the time model looks
// efficiencies up by): the flops of all the calls counted toward it over
// their time. R is the step's block count, fewer when fewer already move
// four times the last-level cache through one pass.
//
// Row (a "gemm" row of probe_compute.h): name "step MxNxK", m, n, k (the
// planner's shape), dtype, threads, gflops, fraction_of_peak, valid,
// max_rel_error (the worst spot check over the distinct calls), form
// ["in_step"].
#pragma once
#include <nlohmann/json.hpp>
#include <vector>

#include "profile/probe_compute.h"

namespace crucible::profile {

struct StepGemm {
  GemmShape call;     // as kernels::gemm is called, forms included
  int m, n, k;        // the planner's shape it counts toward
  bool block;         // once per transformer block, else once per step (the head)
  bool backward;
};

// The step's attention, one block's (B micro-batch rows, T, C, NH heads);
// B = 0: none.
struct StepAttention {
  int B = 0, T = 0, C = 0, NH = 0;
};

struct StepGemms {
  std::vector<StepGemm> calls;  // one block's and the head's, forward and backward, in call order
  int blocks = 1;
  StepAttention attention;
};

std::vector<nlohmann::json> measure_step_gemms(const StepGemms& step, bool half, int threads, double min_seconds,
                                               double peak_gflops);

// The step's attention kernel (kernels::attention_forward and _backward, or
// their bf16 forms) timed at its shape, forward then backward, repeated for
// about min_seconds: a row of the probe's compute.attention, named "step
// attention BxTxCxNH", with B, T, C, NH, dtype, threads, gflops (the planner's
// count: 2 B NH T^2 hs forward, 2.5 times that backward, over their time),
// fraction_of_peak, valid (every output finite), form ["in_step"]. The
// planner's attention efficiency comes from it (plan/cluster_probe.cc);
// without one, a fraction of the GEMMs' is assumed.
nlohmann::json measure_step_attention(const StepAttention& a, bool half, int threads, double min_seconds,
                                      double peak_gflops);

// Whether a "gemm" row was timed inside a replayed step (its form holds "in_step").
bool gemm_row_is_in_step(const nlohmann::json& row);

}  // namespace crucible::profile
