// `crucible bench step`: times the full training step (forward, loss,
// backward, AdamW) of a standard workload on random tokens and reports it
// against the device's ceiling, with a per-kernel-class breakdown: on the CPU
// the FMA peak (profile/cpu_peak.h) and host-clock kernel times; on a GPU the
// GEMM rate and copy bandwidth measured in the same process
// (profile/gpu_ceiling.h) and kernel times from CUDA events
// (kernels/kernel_timer.h), each class against its own ceiling.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"
#include "profile/cpu_peak.h"
#include "profile/gpu_ceiling.h"

namespace crucible::profile {

struct StepBenchOptions {
  std::string workload = "tiny";
  int threads = 0;  // <= 0: all cores
  int steps = 10;   // measured steps
  int warmup = 2;   // steps before measuring (first touch, primitive creation)
  uint64_t seed = 1;
  std::string precision = "fp32";  // "fp32" | "bf16" (train.precision)
  std::string recompute = "none";  // "none" | "selective" | "full" (train.recompute)
  std::string moments = "f32";     // "f32" | "bf16" (optim.moments)
  bool fused_head = false;         // train.fused_head
  std::string kernels;             // a kernel table by ISA name; empty: the CPU's best
  std::string device = "cpu";      // "cpu" | "cuda" | "cuda:N" (as run.device)
  int batch = 0;                   // sequences per step; 0: the workload's
  bool progress = false;  // live line on stderr
};

struct KernelClassTime {
  std::string name;
  double ms_per_step = 0;
  double fraction = 0;  // of the median step
  double gflops = 0;    // achieved, where FLOPs are counted (gemm)
  double gbs = 0;       // achieved traffic by the cost models (kernels/cost.h)
  // Of the class's own ceiling: GEMM's FLOPs against the measured GEMM rate,
  // everything else's bytes against the measured copy bandwidth (GPU only).
  double of_ceiling = 0;
};

struct StepBenchResult {
  std::string workload, isa, precision, recompute;
  std::string device = "cpu";
  GpuCeiling gpu;  // a GPU's measured ceilings (device != cpu)
  bool fused_head = false;
  size_t activation_bytes = 0;  // the arena's high water over a step
  int threads = 0, steps = 0, batch = 0, seq_len = 0;
  // The step as `crucible train` runs it (median, min, max): on the CPU the
  // phase-timed steps below; on a GPU the whole step waited for once at its
  // read-back, replayed from a CUDA graph (run.cuda_graphs' default) or, where
  // CUDA refused the capture (graph_refusal), launched kernel by kernel.
  double ms_per_step = 0, ms_min = 0, ms_max = 0;
  // Medians of the steps whose phases each end by waiting for the device (on
  // a GPU the waits cost the launch queue its lead).
  double phased_ms = 0;
  // The step's parts, medians: on the CPU of those phase-timed steps; on a
  // GPU the GPU's time of each part (kernels/step_parts.h: CUDA events, no
  // wait between the parts) of the replayed steps where their graph times
  // them, else of the steps launched kernel by kernel (parts_from: "replayed"
  // or "launched"; graph_unsplit says why a graph does not).
  double forward_ms = 0, backward_ms = 0, optimizer_ms = 0;
  std::string parts_from;
  // A GPU's whole step, one wait each: launched kernel by kernel, and
  // replayed from a CUDA graph (0 where refused). Medians.
  double launched_ms = 0, graph_ms = 0;
  std::string graph_refusal, graph_unsplit;
  double tokens_per_s = 0, gflop_per_step = 0, gflops = 0, mfu = 0;
  // MFUs are NaN where they cannot be told honestly (profile/cpu_peak.h,
  // honest_mfu): a peak that is not plausible, or a ratio above 1.
  double mfu_measured_peak = 0;  // against the loops' measured throughput
  // The peak MFU counts against: the f32 FMA peak, or in bf16 the matrix
  // unit's (AMX) or twice f32's (AVX512_BF16's vdpbf16ps: two products per
  // f32 lane) where oneDNN has a native bf16 matmul (precision_peak_gflops).
  double peak_gflops = 0;
  double loss_first = 0, loss_last = 0;
  size_t peak_bytes = 0;
  uint64_t steady_state_allocs = 0;  // allocator calls during measured steps
  CpuPeak peak;
  std::vector<KernelClassTime> kernels;
};

Result<StepBenchResult> run_step_bench(const StepBenchOptions& opt);
nlohmann::json to_json(const StepBenchResult& r);
std::string to_table(const StepBenchResult& r);

}  // namespace crucible::profile
