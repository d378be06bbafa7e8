#include "profile/probe_compute.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <type_traits>

#include "core/clock.h"
#include "core/dtype.h"
#include "core/rng.h"
#include "core/threads.h"
#include "kernels/gemm.h"
#include "profile/cpu_peak.h"

namespace crucible::profile {

std::vector<GemmShape> standard_gemm_shapes(bool quick) {
  // The transformer shapes are one training step's GEMMs at DESIGN.md's
  // workloads: tokens x (3C | 4C | C | vocab) x C. They are skinnier than
  // squares and show what the step really gets.
  std::vector<GemmShape> s = {{"square 512", 512, 512, 512},
                              {"square 1024", 1024, 1024, 1024},
                              {"tiny qkv (2048x768x256)", 2048, 768, 256},
                              {"tiny lm head (2048x8192x256)", 2048, 8192, 256},
                              {"gpt2 mlp (256x3072x768)", 256, 3072, 768}};
  if (!quick) {
    s.insert(s.begin() + 2, {"square 2048", 2048, 2048, 2048});
    s.push_back({"gpt2 mlp proj (256x768x3072)", 256, 768, 3072});
    s.push_back({"gpt2 lm head (256x50304x768)", 256, 50304, 768});
  }
  return s;
}

double gemm_spot_error(const float* A, const float* B, const float* C, int m, int n, int k,
                       int samples, uint64_t seed) {
  Rng rng(seed, 0x6e3e);
  double worst = 0;
  for (int s = 0; s < samples; ++s) {
    const int i = int(rng.next_u32() % uint32_t(m)), j = int(rng.next_u32() % uint32_t(n));
    double dot = 0, mag = 0;
    for (int p = 0; p < k; ++p) {
      const double prod = double(A[size_t(i) * k + p]) * double(B[size_t(p) * n + j]);
      dot += prod;
      mag += std::fabs(prod);
    }
    worst = std::max(worst, std::fabs(dot - C[size_t(i) * n + j]) / std::max(mag, 1e-30));
  }
  return worst;
}

namespace {

// One shape, one dtype, one thread count: the best of repeated timed loops.
nlohmann::json measure(const GemmShape& s, bool half, int threads, double min_s, double peak, bool hurry) {
  set_num_threads(threads);
  const size_t ma = size_t(s.m) * s.k, mb = size_t(s.k) * s.n, mc = size_t(s.m) * s.n;
  std::vector<float> A(ma), B(mb), C(mc, 0.0f);
  Rng rng(uint64_t(s.m) * 131 + s.n * 7 + s.k, 0x9e11);
  rng.fill_uniform(A.data(), ma, -1, 1);
  rng.fill_uniform(B.data(), mb, -1, 1);
  std::vector<bf16> Ah, Bh;
  if (half) {
    Ah.resize(ma), Bh.resize(mb);
    for (size_t i = 0; i < ma; ++i) Ah[i] = to_bf16(A[i]), A[i] = to_f32(Ah[i]);
    for (size_t i = 0; i < mb; ++i) Bh[i] = to_bf16(B[i]), B[i] = to_f32(Bh[i]);
  }
  // Transposed operands are stored transposed (A as (k, m), B as (n, k)); the
  // spot check below reads the untransposed A and B.
  std::vector<float> At, Bt;
  std::vector<bf16> Aht, Bht, Ch;
  const bool plain = !s.trans_a && !s.trans_b && !s.accumulate && !s.bf16_out;
  auto transpose = [](const auto& x, int rows, int cols) {
    std::remove_cvref_t<decltype(x)> t(x.size());
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c) t[size_t(c) * rows + r] = x[size_t(r) * cols + c];
    return t;
  };
  if (!plain) {
    At = s.trans_a ? transpose(A, s.m, s.k) : A;
    Bt = s.trans_b ? transpose(B, s.k, s.n) : B;
    if (half) Aht = s.trans_a ? transpose(Ah, s.m, s.k) : Ah, Bht = s.trans_b ? transpose(Bh, s.k, s.n) : Bh;
    if (half && s.bf16_out) Ch.resize(mc);
  }
  const int lda = s.trans_a ? s.m : s.k, ldb = s.trans_b ? s.k : s.n;
  auto call = [&] {
    if (plain && half)
      kernels::gemm_bf16(false, false, s.m, s.n, s.k, Ah.data(), s.k, Bh.data(), s.n, C.data(), s.n,
                         false);
    else if (plain)
      kernels::gemm(false, false, s.m, s.n, s.k, A.data(), s.k, B.data(), s.n, C.data(), s.n,
                    false);
    else if (half)
      kernels::gemm(DType::bf16, s.bf16_out && !s.accumulate ? DType::bf16 : DType::f32, s.trans_a, s.trans_b, s.m,
                    s.n, s.k, Aht.data(), lda, Bht.data(), ldb,
                    s.bf16_out && !s.accumulate ? static_cast<void*>(Ch.data()) : C.data(), s.n, s.accumulate);
    else
      kernels::gemm(s.trans_a, s.trans_b, s.m, s.n, s.k, At.data(), lda, Bt.data(), ldb, C.data(), s.n,
                    s.accumulate);
  };
  call();  // primitive creation, first touch
  const double flops = 2.0 * s.m * s.n * s.k;
  Stopwatch probe_sw;
  call();
  const double one = std::max(probe_sw.elapsed_s(), 1e-6);
  const int iters = hurry ? 1 : std::max(1, int(min_s / 3 / one));
  double best = one;
  for (int rep = 0; rep < (hurry ? 1 : 3); ++rep) {
    Stopwatch sw;
    for (int i = 0; i < iters; ++i) call();
    best = std::min(best, sw.elapsed_s() / iters);
  }
  // One clean product to check: accumulated rows start from zero again; a
  // bf16 output is widened (its rounding is 2^-8 of |c| <= sum |a||b|).
  if (s.accumulate) {
    std::fill(C.begin(), C.end(), 0.0f);
    call();
  }
  if (!Ch.empty() && !s.accumulate)
    for (size_t i = 0; i < mc; ++i) C[i] = to_f32(Ch[i]);
  const double err = gemm_spot_error(A.data(), B.data(), C.data(), s.m, s.n, s.k, 32, 7);
  const double tol = !Ch.empty() ? 1e-2 : half ? 1e-3 : 1e-5;
  const double gflops = flops / best * 1e-9;
  nlohmann::json form = nlohmann::json::array();
  if (s.trans_a) form.push_back("trans_a");
  if (s.trans_b) form.push_back("trans_b");
  if (s.accumulate) form.push_back("accumulate");
  if (s.bf16_out && half && !s.accumulate) form.push_back("bf16_out");
  nlohmann::json row = {{"name", s.name},
          {"m", s.m},
          {"n", s.n},
          {"k", s.k},
          {"dtype", half ? "bf16" : "f32"},
          {"threads", threads},
          {"gflops", gflops},
          {"fraction_of_peak", gflops / peak},
          {"max_rel_error", err},
          {"valid", err < tol}};
  if (!form.empty()) row["form"] = form;
  return row;
}

}  // namespace

nlohmann::json probe_compute(const ComputeOptions& opt) {
  const int saved = num_threads();
  const int all = std::max(1, saved);
  const CpuPeak peak = measure_cpu_peak(all, opt.quick ? 0.2 : 0.5);
  const double per_thread = peak.derived_gflops / all;
  const bool native = kernels::gemm_bf16_native();
  const double bf16_per_thread = precision_peak_gflops(peak, true, native) / all;
  const double min_s = opt.min_seconds > 0 ? opt.min_seconds : opt.quick ? 0.08 : 0.3;
  // The budget: past it, each remaining GEMM is timed once (a busy 2-core
  // VM stretched the quick probe to a minute).
  const double budget_s = opt.budget_s > 0 ? opt.budget_s : opt.quick ? 4 : 120;
  Stopwatch section;
  nlohmann::json gemms = nlohmann::json::array();
  nlohmann::json notes = nlohmann::json::array();
  bool valid = true, hurried = false;
  for (const GemmShape& s : opt.shapes.empty() ? standard_gemm_shapes(opt.quick) : opt.shapes)
    for (bool half : {false, true}) {
      double one_thread = 0;
      for (int threads : all > 1 ? std::vector<int>{1, all} : std::vector<int>{1}) {
        if (half && !native && threads == 1) continue;  // the f32 path again, widened: once is enough
        const double p = (half ? bf16_per_thread : per_thread) * threads;
        const bool hurry = section.elapsed_s() > budget_s;
        hurried |= hurry;
        gemms.push_back(measure(s, half, threads, min_s, p, hurry));
        valid &= gemms.back()["valid"].get<bool>();
        const double g = gemms.back()["gflops"].get<double>();
        // More threads slower than one: something else had the cores.
        if (threads == 1) one_thread = g;
        else if (one_thread > 0 && g < one_thread)
          notes.push_back(s.name + std::string(half ? " bf16" : " f32") + ": " + std::to_string(threads) +
                          " threads ran slower than 1 (" + std::to_string(int(g)) + " < " +
                          std::to_string(int(one_thread)) + " GFLOP/s): the cores were busy; unreliable");
      }
    }
  if (hurried) notes.push_back("time budget spent: the last GEMMs were timed once each");
  set_num_threads(saved);
  return {{"peak",
           {{"isa", peak.isa},
            {"lanes", peak.lanes},
            {"fma_units", peak.fma_units},
            {"clock_ghz", peak.clock_ghz},
            {"threads_all", all},
            {"derived_gflops_1", per_thread},
            {"derived_gflops_all", peak.derived_gflops},
            {"measured_fma_gflops_all", peak.measured_gflops},
            {"amx_gflops_all", peak.amx_gflops},
            {"bf16_peak_gflops_all", precision_peak_gflops(peak, true, native)},
            {"clock_source", peak.clock_source},
            {"plausible", peak.plausible},
            {"notes", peak.notes},
            {"readings",
             {{"imul_clock_ghz", peak.readings.imul_clock_ghz},
              {"add_clock_ghz", peak.readings.add_clock_ghz},
              {"reported_max_ghz", peak.readings.reported_max_ghz},
              {"reported_base_ghz", peak.readings.reported_base_ghz},
              {"cpu_share", peak.readings.cpu_share}}}}},
          {"bf16_native", native},
          {"gemm", gemms},
          {"notes", notes},
          {"valid", valid}};
}

std::string compute_table(const nlohmann::json& j) {
  std::string out;
  char line[256];
  const auto& p = j["peak"];
  std::snprintf(line, sizeof line,
                "  peak: %s, %d lanes x %d FMA pipes x %.2f GHz (sustained) = %.1f GFLOP/s per "
                "thread, %.1f on %d threads (FMA loop: %.1f)\n",
                p["isa"].get<std::string>().c_str(), p["lanes"].get<int>(),
                p["fma_units"].get<int>(), p["clock_ghz"].get<double>(),
                p["derived_gflops_1"].get<double>(), p["derived_gflops_all"].get<double>(),
                p["threads_all"].get<int>(), p["measured_fma_gflops_all"].get<double>());
  out += line;
  if (p.value("amx_gflops_all", 0.0) > 0) {
    std::snprintf(line, sizeof line, "  bf16 ceiling: AMX, its loop %.1f GFLOP/s on %d threads\n",
                  p["amx_gflops_all"].get<double>(), p["threads_all"].get<int>());
    out += line;
  }
  if (p.contains("clock_source") && p["clock_source"] != "imul chain")
    out += "  clock: " + p["clock_source"].get<std::string>() + "\n";
  if (!p.value("plausible", true)) out += "  PEAK NOT PLAUSIBLE: no MFU is shown against it\n";
  for (const auto& n : p.value("notes", nlohmann::json::array())) out += "  note: " + n.get<std::string>() + "\n";
  if (!j["bf16_native"].get<bool>())
    out += "  bf16: no native bf16 matmul on this CPU; bf16 inputs run the f32 path\n";
  std::snprintf(line, sizeof line, "  %-32s %5s %7s %10s %8s %6s\n", "GEMM (m x n x k)", "dtype",
                "threads", "GFLOP/s", "of peak", "check");
  out += line;
  for (const auto& g : j["gemm"]) {
    std::snprintf(line, sizeof line, "  %-32s %5s %7d %10.1f %7.0f%% %6s\n",
                  g["name"].get<std::string>().c_str(), g["dtype"].get<std::string>().c_str(),
                  g["threads"].get<int>(), g["gflops"].get<double>(),
                  100 * g["fraction_of_peak"].get<double>(), g["valid"].get<bool>() ? "ok" : "FAIL");
    out += line;
  }
  for (const auto& n : j.value("notes", nlohmann::json::array())) out += "  note: " + n.get<std::string>() + "\n";
  return out;
}

}  // namespace crucible::profile
