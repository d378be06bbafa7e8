// crucible probe, compute section: GEMM throughput through crucible's own
// GEMM path (kernels::gemm, kernels::gemm_bf16 — the calls training makes)
// for f32 and bf16, square and transformer-step shapes, on 1 thread and on
// all threads, each as a fraction of the CPU's FMA peak.
//
// JSON ("compute"):
//   peak: {isa, lanes, fma_units, clock_ghz (sustained, all threads busy),
//          derived_gflops_1, derived_gflops_all (threads x fma_units x lanes x
//          2 x clock), measured_fma_gflops_all (an FMA loop on all threads),
//          threads_all}
//   bf16_native: whether oneDNN has a bf16 matmul here (without one, bf16
//          inputs are widened and run the f32 path; its peak is f32's)
//   gemm: [{name ("square 1024", "tiny qkv", ...), m, n, k, dtype ("f32" |
//          "bf16"), threads, gflops (2mnk / best time), fraction_of_peak
//          (gflops / derived peak for that many threads, x2 for native
//          bf16), valid, max_rel_error}]
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
};

struct ComputeOptions {
  bool quick = false;
  std::vector<GemmShape> shapes;  // empty: the standard list (smaller when quick)
  double min_seconds = 0;         // per measurement; 0: 0.3 (quick 0.08)
};

std::vector<GemmShape> standard_gemm_shapes(bool quick);
nlohmann::json probe_compute(const ComputeOptions& opt);
std::string compute_table(const nlohmann::json& j);

// The spot check: max over `samples` random (i, j) of |C - A·B| / sum|a||b|,
// in double, for row-major A (m,k), B (k,n), C (m,n).
double gemm_spot_error(const float* A, const float* B, const float* C, int m, int n, int k,
                       int samples, uint64_t seed);

}  // namespace crucible::profile
