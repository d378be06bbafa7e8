// attention_bench: the fused causal attention kernel, forward and backward, in
// every form every kernel table this CPU runs has (f32; bf16 widened to f32
// products; bf16 in pairs, vdpbf16ps's shape, dispatched on avx512bf16),
// each against the ceiling measured in this run: the FMA loop on the same
// threads (profile/cpu_peak.h), twice it for the pairs form (vdpbf16ps does
// two products per f32 lane where the CPU has it; elsewhere the pairs are
// emulated with two FMAs and the f32 ceiling applies).
//
//   build/attention_bench [tiny|gpt2-124M|gpt2-1024] [--threads N] [--reps R]
//
// Shapes: tiny (B 8, T 256, C 256, 4 heads), gpt2-124M as the bench step runs
// it (B 4, T 64, C 768, 12 heads), gpt2-1024 (B 1, T 1024, C 768, 12 heads).
// FLOPs count the causal half: forward 2 products of B NH T(T+1)/2 hs MACs,
// backward 5 (S again, dV, dP, dK, dQ). Best of R repetitions.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/rng.h"
#include "core/threads.h"
#include "kernels/kernels.h"
#include "profile/cpu_peak.h"

using namespace crucible;

namespace {

struct Shape {
  const char* name;
  int B, T, C, NH;
};
constexpr Shape kShapes[] = {
    {"tiny", 8, 256, 256, 4}, {"gpt2-124M", 4, 64, 768, 12}, {"gpt2-1024", 1, 1024, 768, 12}};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  const Shape* shape = &kShapes[0];
  int threads = 0, reps = 20;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
    } else if (a == "--reps" && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else {
      shape = nullptr;
      for (const Shape& s : kShapes)
        if (a == s.name) shape = &s;
      if (!shape) {
        std::fprintf(stderr,
                     "[attention_bench] unknown argument '%s' (shapes: tiny, gpt2-124M, gpt2-1024; "
                     "--threads N, --reps R)\n",
                     a.c_str());
        return 2;
      }
    }
  }
  set_num_threads(threads);
  const int B = shape->B, T = shape->T, C = shape->C, NH = shape->NH, hs = C / NH;
  const size_t n = size_t(B) * T * C, nl = size_t(B) * NH * T;
  Rng rng(1, 2);
  std::vector<float> qkv(3 * n), dout(n), out(n), lse(nl), dqkv(3 * n);
  rng.fill_uniform(qkv.data(), qkv.size(), -1, 1);
  rng.fill_uniform(dout.data(), dout.size(), -1, 1);
  std::vector<bf16> qkv16(3 * n), out16(n), dqkv16(3 * n);
  for (size_t i = 0; i < qkv.size(); ++i) qkv16[i] = to_bf16(qkv[i]);
  const double macs = double(B) * NH * (double(T) * (T + 1) / 2) * hs;
  const double fwd_flop = 2 * 2 * macs, bwd_flop = 5 * 2 * macs;
  const profile::CpuPeak peak = profile::measure_cpu_peak(num_threads(), 0.6);
  std::printf("attention %s: B %d, T %d, C %d, %d heads (hs %d); %d threads, best of %d\n",
              shape->name, B, T, C, NH, hs, num_threads(), reps);
  std::printf(
      "ceiling: FMA loop %.1f GFLOP/s f32 (derived %.1f: %d pipe(s) x %d lanes at %.2f GHz)\n",
      peak.measured_gflops, peak.derived_gflops, peak.fma_units, peak.lanes, peak.clock_ghz);
  std::printf("%-11s %-12s %9s %9s %8s %9s %9s %8s\n", "table", "form", "fwd ms", "GFLOP/s",
              "of ceil", "bwd ms", "GFLOP/s", "of ceil");
  for (const kernels::KernelTable* k : kernels::supported_tables()) {
    const bool native_pairs = std::string(k->isa) == "avx512bf16";
    for (int form = 0; form < 3; ++form) {
      double best_f = 1e30, best_b = 1e30;
      for (int r = 0; r < reps + 1; ++r) {  // the first is a warm-up
        auto t0 = std::chrono::steady_clock::now();
        if (form == 0) k->attention_forward(out.data(), lse.data(), qkv.data(), B, T, C, NH);
        if (form == 1)
          k->attention_forward_bf16(out16.data(), lse.data(), qkv16.data(), B, T, C, NH);
        if (form == 2)
          k->attention_forward_bf16_pairs(out16.data(), lse.data(), qkv16.data(), B, T, C, NH);
        const double tf = seconds_since(t0);
        t0 = std::chrono::steady_clock::now();
        if (form == 0)
          k->attention_backward(dqkv.data(), dout.data(), qkv.data(), out.data(), lse.data(), B, T,
                                C, NH);
        if (form == 1)
          k->attention_backward_bf16(dqkv16.data(), dout.data(), qkv16.data(), out16.data(),
                                     lse.data(), B, T, C, NH);
        if (form == 2)
          k->attention_backward_bf16_pairs(dqkv16.data(), dout.data(), qkv16.data(), out16.data(),
                                           lse.data(), B, T, C, NH);
        const double tb = seconds_since(t0);
        if (r > 0) best_f = std::min(best_f, tf), best_b = std::min(best_b, tb);
      }
      // bf16 on the avx512bf16 table: its attention_*_bf16 entry is the pairs form.
      const bool same_as_pairs =
          form == 1 && k->attention_forward_bf16 == k->attention_forward_bf16_pairs;
      const char* name = form == 0   ? "f32"
                         : form == 1 ? (same_as_pairs ? "bf16 (pairs)" : "bf16 widened")
                                     : "bf16 pairs";
      const double ceiling =
          peak.measured_gflops * (form == 2 || same_as_pairs ? (native_pairs ? 2 : 1) : 1);
      const double gf = fwd_flop / best_f * 1e-9, gb = bwd_flop / best_b * 1e-9;
      std::printf("%-11s %-12s %9.3f %9.1f %7.0f%% %9.3f %9.1f %7.0f%%\n", k->isa, name,
                  best_f * 1e3, gf, 100 * gf / ceiling, best_b * 1e3, gb, 100 * gb / ceiling);
    }
  }
  return 0;
}
