// The probe's clock and peak arithmetic (profile/cpu_peak.h, derive_peak)
// against the figures of every machine this project has run on, and the
// measurement itself on this machine.
#include "profile/cpu_peak.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/threads.h"
#include "support/cli_runner.h"

namespace crucible::profile {
namespace {

// One machine: what its loops read and what it truly is.
struct Machine {
  const char* name;
  PeakReadings r;
  double true_clock_ghz;  // lscpu / the vendor's sustained all-core clock
  int pipes;              // full-width FMAs per cycle per core
  double best_f32_gemm, best_bf16_gemm;  // GFLOP/s on r.threads, measured by `crucible probe`
  bool bf16_native;
};

PeakReadings readings(const char* isa, int lanes, int threads, double imul, double add, double fma,
                      double amx, double max_ghz, double base_ghz) {
  PeakReadings r;
  r.isa = isa, r.lanes = lanes, r.threads = threads;
  r.imul_clock_ghz = imul, r.add_clock_ghz = add, r.fma_gflops = fma, r.amx_gflops = amx;
  r.reported_max_ghz = max_ghz, r.reported_base_ghz = base_ghz;
  return r;
}

// Figures from docs/performance.md and the issues that reported them. Where a
// machine ran before the imul chain existed, its imul reading is the clock its
// FMA loop implies at its known pipe count (the loop was right; the old add
// chain was not), and the add reading is what the old chain printed.
const Machine kMachines[] = {
    // AMD EPYC Zen 3 VM, AVX2, 2 vCPUs (2026-12-03): FMA 204.9 at 3.21 GHz,
    // f32 GEMM 172-188, no native bf16 matmul.
    {"Zen 3 VM (AVX2)", readings("avx2", 8, 2, 3.21, 3.21, 204.9, 0, 0, 2.45), 3.21, 2, 188, 188, false},
    // AMD EPYC Zen 4 VM (family 25 model 17), AVX-512 double-pumped, 2 vCPUs
    // (2026-12-04, this project's machine): imul 3.65, add 3.65, FMA 233.5,
    // TSC 2.596; f32 GEMM 224, bf16 447.
    {"Zen 4 VM (AVX-512, double-pumped)", readings("avx512", 16, 2, 3.65, 3.65, 233.5, 0, 0, 2.596), 3.65, 1,
     224, 447, true},
    // AMD Zen 5 (full-width AVX-512, AVX512_BF16): the FMA peak 441 GFLOP/s on
    // 2 threads; oneDNN 300-336 f32.
    {"Zen 5 (AVX-512 full width)", readings("avx512", 16, 2, 3.45, 3.45, 441, 0, 0, 2.6), 3.45, 2, 336, 660,
     true},
    // Intel Xeon VM with AMX-BF16, 2 vCPUs, lscpu 2.6 GHz, turbo ~3.5: the
    // old add-immediate chain read 17.8-18.6 GHz; FMA loop 392 on 2 threads;
    // f32 GEMM 140-162; bf16 GEMM 505-797 through AMX (the two vCPUs share
    // one core's AMX unit: ~3.1 TFLOP/s).
    {"Xeon VM with AMX", readings("avx512", 16, 2, 3.06, 18.2, 392, 3100, 0, 2.6), 3.06, 2, 162, 797, true},
    // The 16-core Intel Xeon host: the old chain read 7.7 and 14.7 GHz; its
    // cpufreq maximum 3.8 GHz, all-core turbo ~3.0 (its GEMMs were not
    // recorded: 0 checks nothing there).
    {"16-core Xeon host", readings("avx512", 16, 16, 3.0, 14.7, 3010, 0, 3.8, 2.1), 3.0, 2, 0, 0, true},
};

TEST(CpuPeak, EveryKnownMachineGetsItsClockPipesAndACeilingAboveItsGemms) {
  for (const Machine& m : kMachines) {
    SCOPED_TRACE(m.name);
    const CpuPeak p = derive_peak(m.r);
    EXPECT_TRUE(p.plausible);
    EXPECT_NEAR(p.clock_ghz, m.true_clock_ghz, 0.05 * m.true_clock_ghz);
    EXPECT_LE(p.clock_ghz, kMaxPlausibleClockGhz);
    EXPECT_EQ(p.fma_units, m.pipes);
    EXPECT_NEAR(p.derived_gflops, m.r.threads * m.pipes * m.r.lanes * 2 * m.true_clock_ghz,
                0.05 * p.derived_gflops);
    // A ceiling below a measurement is no ceiling: every GEMM this machine
    // ran is at most its precision's peak, so no MFU exceeds 1.
    EXPECT_GE(precision_peak_gflops(p, false, m.bf16_native), m.best_f32_gemm);
    EXPECT_GE(precision_peak_gflops(p, true, m.bf16_native), m.best_bf16_gemm);
    EXPECT_LE(honest_mfu(m.best_bf16_gemm, precision_peak_gflops(p, true, m.bf16_native), p.plausible), 1.0);
  }
}

TEST(CpuPeak, AnAddChainFasterThanOnePerCycleIsNamedNotUsed) {
  const CpuPeak p = derive_peak(kMachines[3].r);  // the Xeon VM: add chain 6x the clock
  EXPECT_NEAR(p.clock_ghz, 3.06, 0.01);
  ASSERT_FALSE(p.notes.empty());
  EXPECT_NE(p.notes[0].find("adds per cycle"), std::string::npos) << p.notes[0];
}

TEST(CpuPeak, AClockOutOfBoundsFallsBackAndIsNotPlausible) {
  // The imul chain read as the old add chain did on the Xeon VM (18 GHz).
  PeakReadings r = kMachines[3].r;
  r.imul_clock_ghz = 18.2;
  CpuPeak p = derive_peak(r);
  EXPECT_FALSE(p.plausible);
  EXPECT_DOUBLE_EQ(p.clock_ghz, 2.6);  // the reported base stands in
  EXPECT_TRUE(std::isnan(honest_mfu(100, precision_peak_gflops(p, false, true), p.plausible)));
  // With a reported maximum, above 1.1x it is out of bounds; it stands in.
  r = kMachines[4].r;
  r.imul_clock_ghz = 4.5;
  p = derive_peak(r);
  EXPECT_FALSE(p.plausible);
  EXPECT_DOUBLE_EQ(p.clock_ghz, 3.8);
  // Without anything reported, physics: 6.5 GHz.
  r.reported_max_ghz = r.reported_base_ghz = 0;
  EXPECT_DOUBLE_EQ(clock_upper_bound(r), kMaxPlausibleClockGhz);
  r.imul_clock_ghz = 6.6;
  EXPECT_FALSE(derive_peak(r).plausible);
  r.imul_clock_ghz = 6.2;
  EXPECT_TRUE(derive_peak(r).plausible);
  // Below 0.4 GHz no server core runs.
  r.imul_clock_ghz = 0.2;
  EXPECT_FALSE(derive_peak(r).plausible);
}

TEST(CpuPeak, APeakBelowTheFmaLoopIsRaisedToIt) {
  // A clock read low (a window lost to a neighbour): the loop ran 10% above
  // the derivation; the ceiling is the loop's, and the pipes stay 2.
  PeakReadings r = kMachines[2].r;
  r.imul_clock_ghz = 3.45 / 1.1;
  const CpuPeak p = derive_peak(r);
  EXPECT_EQ(p.fma_units, 2);
  EXPECT_DOUBLE_EQ(p.derived_gflops, 441);
}

TEST(CpuPeak, HonestMfuRefusesAboveOne) {
  EXPECT_DOUBLE_EQ(honest_mfu(50, 100, true), 0.5);
  EXPECT_DOUBLE_EQ(honest_mfu(100, 100, true), 1.0);
  EXPECT_TRUE(std::isnan(honest_mfu(101, 100, true)));
  EXPECT_TRUE(std::isnan(honest_mfu(50, 100, false)));
  EXPECT_TRUE(std::isnan(honest_mfu(50, 0, true)));
}

TEST(CpuPeak, Bf16CeilingIsTheMatrixUnitsWhereThereIsOne) {
  CpuPeak p = derive_peak(kMachines[1].r);  // Zen 4: vdpbf16ps, no AMX
  EXPECT_DOUBLE_EQ(precision_peak_gflops(p, true, true), 2 * p.derived_gflops);
  EXPECT_DOUBLE_EQ(precision_peak_gflops(p, true, false), p.derived_gflops);
  p = derive_peak(kMachines[3].r);  // the Xeon VM: AMX
  EXPECT_DOUBLE_EQ(precision_peak_gflops(p, true, true), 3100);
}

// The measurement on this machine: within physics, consistent with itself.
TEST(CpuPeak, MeasuredHereIsPlausible) {
  const CpuPeak p = measure_cpu_peak(std::max(1, num_threads()), 0.15);
  EXPECT_TRUE(p.plausible) << (p.notes.empty() ? "" : p.notes[0]);
  EXPECT_GT(p.clock_ghz, 0.4);
  EXPECT_LE(p.clock_ghz, kMaxPlausibleClockGhz);
  if (p.readings.reported_max_ghz > 0) {
    EXPECT_LE(p.clock_ghz, 1.1 * p.readings.reported_max_ghz);
  }
  if (p.measured_gflops > 0) {
    EXPECT_LE(p.measured_gflops, 1.05 * p.derived_gflops);
  }
}

// What a user reads: `bench step --json` never shows an MFU above 1, in
// either precision, and its peak is plausible here.
TEST(CpuPeak, BenchStepMfuIsAtMostOneHere) {
  for (const char* precision : {"fp32", "bf16"}) {
    SCOPED_TRACE(precision);
    auto r = e2e::run_crucible({"bench", "step", "--workload", "tiny", "--steps", "2", "--warmup", "1",
                                "--precision", precision, "--json"});
    ASSERT_EQ(r.code, 0) << r.output;
    const auto j = nlohmann::json::parse(r.output.substr(r.output.find('{')), nullptr, false);
    ASSERT_TRUE(j.is_object()) << r.output;
    EXPECT_TRUE(j["peak"]["plausible"].get<bool>()) << j["peak"].dump();
    EXPECT_LE(j["peak"]["clock_ghz"].get<double>(), kMaxPlausibleClockGhz);
    for (const char* k : {"mfu", "mfu_vs_measured_fma"}) {
      ASSERT_TRUE(j.contains(k)) << k;
      if (j[k].is_null()) continue;
      EXPECT_GT(j[k].get<double>(), 0.0) << k;
      EXPECT_LE(j[k].get<double>(), 1.0) << k;
    }
    // The kernel classes' shares are of the same steps' mean, so what they
    // leave is never negative (a median step left -5% when one step was slow).
    double shares = 0;
    for (auto& [name, c] : j["kernels"].items()) {
      EXPECT_GE(c["ms_per_step"].get<double>(), 0.0) << name;
      shares += c["fraction"].get<double>();
    }
    EXPECT_NEAR(shares, 1.0, 1e-9);
  }
}

}  // namespace
}  // namespace crucible::profile
