// crucible probe, compute section: GEMM throughput through crucible's own
// GEMM path (kernels::gemm, kernels::gemm_bf16 — the calls training makes)
// for f32 and bf16, square and transformer-step shapes, on 1 thread and on
// all threads, each as a fraction of the CPU's FMA peak.
//
// JSON ("compute"):
//   peak: {isa, lanes, fma_units, clock_ghz (sustained, all threads busy),
//          derived_gflops_1, derived_gflops_all (threads x fma_units x lanes x
//          2 x clock), measured_fma_gflops_all (an FMA loop on all threads),
//          amx_gflops_all (an AMX tdpbf16ps loop; 0 without AMX),
//          bf16_peak_gflops_all (bf16's ceiling: AMX's, else 2x f32's with a
//          native bf16 matmul, else f32's), threads_all, clock_source
//          ("imul chain" or what stood in), plausible (false: the clock was
//          out of physical bounds; no MFU against it), notes [lines],
//          readings {imul_clock_ghz, add_clock_ghz, reported_max_ghz,
//          reported_base_ghz, cpu_share} (profile/cpu_peak.h)}
//   bf16_native: whether oneDNN has a bf16 matmul here (without one, bf16
//          inputs are widened and run the f32 path; its peak is f32's)
//   gemm: [{name ("square 1024", "tiny qkv", ...), m, n, k, dtype ("f32" |
//          "bf16"), threads, gflops (2mnk / best time), fraction_of_peak
//          (gflops / that precision's peak for that many threads), valid,
//          max_rel_error}]
//   notes: [lines]: all threads slower than one thread (the cores were
//          busy), the time budget spent
//   valid: every GEMM's spot check passed
// Validation: 32 random entries of C recomputed in double from the same
// (bf16-rounded where bf16) inputs; relative error against sum |a||b| must be
// below 1e-5 (f32) / 1e-3 (bf16).
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace crucible::profile {

struct GemmShape {
  std::string name;
  int m = 0, n = 0, k = 0;
  // As a training step calls it (nn/linear.cc): backward's input gradient
  // takes W transposed, its weight gradient X transposed and accumulates
  // into f32; bf16 forwards write bf16. Plain row-major (all false) in the
  // standard list.
  bool trans_a = false, trans_b = false, accumulate = false, bf16_out = false;
};

struct ComputeOptions {
  bool quick = false;
  std::vector<GemmShape> shapes;  // empty: the standard list (smaller when quick)
  double min_seconds = 0;         // per measurement; 0: 0.3 (quick 0.08)
  double budget_s = 0;            // the section; past it GEMMs are timed once; 0: 120 (quick 4)
};

std::vector<GemmShape> standard_gemm_shapes(bool quick);
nlohmann::json probe_compute(const ComputeOptions& opt);
std::string compute_table(const nlohmann::json& j);

// The spot check: max over `samples` random (i, j) of |C - A·B| / sum|a||b|,
// in double, for row-major A (m,k), B (k,n), C (m,n).
double gemm_spot_error(const float* A, const float* B, const float* C, int m, int n, int k,
                       int samples, uint64_t seed);

}  // namespace crucible::profile
