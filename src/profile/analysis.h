// Analyses of a run's measurements: model FLOP utilisation, allocator leak
// detection, straggler ranks, and the expected data-parallel communication
// volume. Pure functions of their inputs (no I/O, no clocks): the trainer and
// `crucible report` feed them what metrics*.jsonl and the allocator recorded.
// Thread-safe (no shared state).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "nn/gpt.h"

namespace crucible::profile {

// ---- MFU ----
// Model FLOP utilisation (PaLM, appendix B): achieved model FLOP/s over the
// hardware's peak. flops_per_token counts training FLOPs (forward + backward)
// without rematerialisation: 6 N + 12 L C T, see nn::GPTConfig::flops_per_token.
// 0 when peak_flops <= 0.
double mfu(double flops_per_token, double tokens_per_s, double peak_flops);
// The same with flops_per_token = model.flops_per_token(T).
double mfu(const nn::GPTConfig& model, int T, double tokens_per_s, double peak_flops);

// ---- Leaks ----
// The allocator's bytes in use, sampled once per step, rise and fall within a
// step (activations); what must not move is the *floor*: the minimum over a
// sliding window of `window` steps. A leak is a floor that grows steadily:
//   - after the first warmup_steps, the least-squares slope of the floor
//     exceeds min_slope_bytes_per_step, and
//   - the floor at the end exceeds the floor just after warm-up by more than
//     min_growth_fraction of it AND by more than min_growth_bytes, and
//   - the growth is steady: the median over steps i of the floor's rise
//     from i to i + L (L = a quarter of the measured steps), per step, also
//     exceeds min_slope_bytes_per_step. A one-time step-up (a checkpoint
//     buffer allocated once, a pool growing to its working size) lies within
//     at most a third of those spans and cannot move the median; a leak on
//     top of one still fires. (Two separate step-ups may pass for a leak.)
struct LeakOptions {
  int warmup_steps = 10;
  int window = 16;  // at least the period of the in-use sawtooth
  double min_slope_bytes_per_step = 1024;
  double min_growth_fraction = 0.005;
  double min_growth_bytes = 256 * 1024;
};

struct LeakVerdict {
  bool leaking = false;
  double bytes_per_step = 0;  // the steady growth rate above (0 when too few steps)
  double floor_start = 0;     // floor just after warm-up (bytes)
  double floor_end = 0;       // floor at the last step (bytes)
  // One line: "[profile] memory leak: in-use floor grows 4.0 KiB/step (...)",
  // or why it is not a leak / could not be judged.
  std::string message;
};

LeakVerdict detect_leak(const std::vector<double>& in_use_bytes_per_step,
                        const LeakOptions& opt = {});

// Per allocation site (the allocator's tag names): the sites whose floor
// grows, largest slope first; empty when none leaks.
struct SiteLeak {
  std::string site;
  LeakVerdict verdict;
};
std::vector<SiteLeak> detect_leaks_by_site(
    const std::map<std::string, std::vector<double>>& in_use_bytes_per_site,
    const LeakOptions& opt = {});

// ---- Stragglers ----
// One step of one rank, as metrics.rank{R}.jsonl records it (ms).
struct PhaseTimes {
  double step_ms = 0, data_wait_ms = 0, forward_ms = 0, backward_ms = 0, optimizer_ms = 0,
         comm_ms = 0;
};

struct Straggler {
  int rank = 0;
  double compute_ms = 0;       // median over steps of step_ms - comm_ms
  double excess = 0;           // compute_ms / (median over ranks) - 1
  std::string phase;           // "data_wait" | "forward" | "backward" | "optimizer" | "other"
  double phase_excess_ms = 0;  // that phase's median minus the median over ranks
};

struct StragglerReport {
  double median_compute_ms = 0;       // median over ranks of each rank's median
  std::vector<Straggler> stragglers;  // slowest first; empty when balanced
  std::string message;                // one line per straggler, or "balanced"
};

// per_rank[r][i]: rank r's step i. In synchronous data parallelism every rank
// waits for the slowest at the gradient reduction, so the *waiters* show a
// long comm_ms and the slow rank a long compute phase: ranks are compared on
// compute time (step_ms - comm_ms), which names the slow rank, not the
// waiters. A rank is a straggler when its median compute time exceeds the
// median over ranks by more than `threshold` (a fraction). Its phase is the
// one whose median exceeds the median over ranks the most ("other": step
// time not in any phase, e.g. loop overhead). The excess must also exceed
// min_excess_ms: steps of a few ms differ by that much from scheduling noise
// alone, and a warning about it would be noise too.
StragglerReport detect_stragglers(const std::vector<std::vector<PhaseTimes>>& per_rank,
                                  double threshold = 0.10, double min_excess_ms = 5.0);

// ---- Communication volume ----
// Bytes each rank sends per optimizer step for data parallelism over `world`
// ranks with a ring algorithm (bandwidth term; every collective moves
// (n-1)/n of its buffer per rank per pass), P = params, b = dtype_bytes,
// matching dist/data_parallel.h:
//   zero 0: allreduce of gradients                 2 (n-1)/n P b
//   zero 1: allreduce of gradients, then all-gather
//           of the updated parameters              3 (n-1)/n P b
//   zero 2: reduce-scatter of gradients, then
//           all-gather of the parameters           2 (n-1)/n P b
// 0 for world <= 1. zero outside 0..2 is treated as 2.
double expected_comm_bytes_per_step(int64_t params, int world, int zero_stage, int dtype_bytes);

struct CommVolumeCheck {
  bool ok = true;
  double ratio = 0;     // measured / expected (0 when expected is 0)
  std::string warning;  // empty when ok
};
// Warns when measured bytes are < 50% or > 150% of the expected: the job is
// not distributing as configured (e.g. a rank skipping reductions, or
// reducing twice). Expected 0 (one rank) with measured > 0 also warns.
CommVolumeCheck check_comm_volume(double measured_bytes, double expected_bytes);

}  // namespace crucible::profile
